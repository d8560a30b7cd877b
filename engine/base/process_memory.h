// Memory figures of this process and machine, read from /proc (Linux), defined once for the run
// estimate, the soak benchmark and the long GUI check. Header-only, standard library only.
#pragma once

#include <unistd.h>

#include <fstream>
#include <string>

namespace cl {

// Resident set size of this process in bytes (0 when unknown).
inline double resident_bytes() {
    long pages = 0, resident = 0;
    std::ifstream("/proc/self/statm") >> pages >> resident;
    return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

// Bytes this process may still allocate on the CPU (MemAvailable); 0 when unknown.
inline double available_memory_bytes() {
    std::ifstream in("/proc/meminfo");
    std::string key, unit;
    double kb = 0;
    while (in >> key >> kb >> unit)
        if (key == "MemAvailable:") return kb * 1024;
    return 0;
}

}  // namespace cl
