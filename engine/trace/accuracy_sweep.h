// Accuracy against the number of denoising steps: the blog's third claim (uniform-noise diffusion
// degrades more gracefully than masked diffusion as the step count drops). `cachelens-cli
// sweep-steps` measures it; a session stores it as a report (sessions/reports.h) and the app's
// "accuracy vs steps" panel draws it. Plain data, like every record in cl_trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cl::trace {

// One (model, step count, task family) cell: exact match over `items` eval items.
struct AccuracyPoint {
    std::string model;          // model folder name
    std::string noise_process;  // "masked" or "uniform"
    std::string task;           // scored family: arith, kv, reverse
    int32_t steps = 0;          // denoising steps T
    int32_t items = 0;
    int32_t correct = 0;
    double low = 0, high = 0;  // Wilson 95% interval of correct / items
    double tokens_per_s = 0;

    double accuracy() const { return items > 0 ? static_cast<double>(correct) / items : 0.0; }
};

struct AccuracySweep {
    std::string policy = "none";
    int32_t gen_len = 0;    // G, the same for every point
    int32_t block_len = 0;  // B
    uint64_t task_seed = 1;
    std::vector<AccuracyPoint> points;

    // The distinct (model, task) series, in first-seen order.
    std::vector<std::pair<std::string, std::string>> series() const;
};

}  // namespace cl::trace
