#include "engine/model/phased_region.h"

#include <ATen/Parallel.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

namespace cl::detail {
namespace {

// Spins of a barrier wait before it yields the core: about a millisecond of pause instructions,
// more than the phases of a cached step's layer wait for one another (a few to tens of us), less
// than a time slice of a thread that needs this core to finish the share waited for.
constexpr int kSpinsBeforeYield = 20000;

void pause_briefly() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

// The shares' arrivals at the ends of the phases: phase i is over for everyone once the arrivals,
// each weighted by the shares it stands for, add up to (i + 1) times the shares.
class ShareBarrier {
public:
    void arrive_and_wait(int64_t weight, int64_t target) {
        m_arrived.fetch_add(weight, std::memory_order_acq_rel);
        for (int spins = 0; m_arrived.load(std::memory_order_acquire) < target; ++spins) {
            if (spins < kSpinsBeforeYield)
                pause_briefly();
            else
                std::this_thread::yield();
        }
    }

private:
    std::atomic<int64_t> m_arrived{0};
};

}  // namespace

int64_t phase_shares() {
#if AT_PARALLEL_OPENMP
    return at::in_parallel_region() ? 1 : at::get_num_threads();
#else
    return 1;
#endif
}

void run_in_phases(const std::vector<PhaseWork>& phases) {
    const int64_t shares = phase_shares();
    ShareBarrier barrier;
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_lock;
    // A throwing share still arrives at every barrier (the others wait there for it); no share
    // starts a phase after one has failed.
    const auto run_shares = [&](int64_t first, int64_t last) {
        for (size_t i = 0; i < phases.size(); ++i) {
            if (!failed.load(std::memory_order_acquire)) {
                try {
                    phases[i](first, last, shares);
                } catch (...) {
                    const std::lock_guard<std::mutex> hold(error_lock);
                    if (!error) error = std::current_exception();
                    failed.store(true, std::memory_order_release);
                }
            }
            if (i + 1 < phases.size())
                barrier.arrive_and_wait(last - first, shares * static_cast<int64_t>(i + 1));
        }
    };
    if (shares == 1)
        run_shares(0, 1);
    else
        at::parallel_for(0, shares, 1, run_shares);
    if (error) std::rethrow_exception(error);
}

}  // namespace cl::detail
