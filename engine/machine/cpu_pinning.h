// The benches' probes' two needs of the scheduler: the CPUs the calling thread may run on, and
// pinning a thread to one of them (engine/machine/core_speeds.h, engine/machine/core_placement.h).
// Linux only; elsewhere no CPUs and no pinning.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <vector>

namespace cl::machine {

// The CPUs of the calling thread's affinity mask in ascending order; empty where it cannot be
// read (or off Linux).
inline std::vector<int> allowed_cpus() {
    std::vector<int> cpus;
#ifdef __linux__
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return {};
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
#endif
    return cpus;
}

// Pins the calling thread to `cpu`; false where it cannot be (or off Linux).
inline bool pin_this_thread_to(int cpu) {
#ifdef __linux__
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
#else
    (void)cpu;
    return false;
#endif
}

}  // namespace cl::machine
