// libFuzzer harness: open an arbitrary file as a session and read everything in it. Any outcome is
// fine except a crash, a hang or a leak: bad files must end in a SessionError.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "sessions/session_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    char path[] = "/tmp/cachelens-fuzz-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return 0;
    if (write(fd, data, size) != static_cast<ssize_t>(size)) {
    }
    close(fd);
    try {
        auto r = cl::sessions::SessionReader::open(path, /*repair=*/true);
        for (const auto& run : r->runs()) {
            r->step_scalars(run.run_id);
            for (int64_t s = 0; s < std::min<int64_t>(run.step_count, 64); ++s) {
                try {
                    r->load_step(run.run_id, static_cast<int32_t>(s));
                } catch (const cl::sessions::SessionError&) {
                }
            }
        }
    } catch (const cl::sessions::SessionError&) {
    }
    unlink(path);
    unlink((std::string(path) + "-wal").c_str());
    unlink((std::string(path) + "-shm").c_str());
    return 0;
}
