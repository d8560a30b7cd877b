// What a hyperparameter sweep measures: one PointResult per (model, device, policy, parameter
// values), each with the outcome of every task item it ran. Derived metrics (accuracy with its
// interval, speedup, FLOP ratio, efficiency, agreement) are computed from these on reading
// (point_metrics.h), so shards and resumed runs merge by rows. Standard library only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cl::sweep {

// One task item as one point ran it.
struct ItemResult {
    std::string family;      // arith, kv, reverse
    int32_t index = 0;       // the item's position in its family (the spec fixes the task seed)
    bool correct = false;    // exact match of the extracted answer
    int32_t generated = 0;   // response tokens before the first EOS
    double wall_ms = 0;      // the run's step wall time
    double flops = 0;        // analytical FLOPs computed
    double flops_full = 0;   // FLOPs of a full forward at every step
    int32_t prompt_len = 0;  // P: final_tokens[P..] is the response
    std::vector<int32_t> final_tokens;  // (P + G) the finished sequence
};

// One point of the sweep with its identity and where it ran.
struct PointResult {
    std::string key;    // model|device|policy|k=v,... : the identity across runs and shards
    int32_t index = 0;  // position in the spec's expansion (shards split on it)
    std::string model;  // the model as the spec names it ("default": the embedded model)
    std::string device = "cpu";
    std::string policy;
    std::map<std::string, double> params;  // resolved values (every parameter of the policy)
    int32_t threads = 1;
    std::string host;          // the machine that measured it
    std::string finished_utc;  // ISO 8601
    std::vector<ItemResult> items;
};

// The identity of a point: model, device, policy and every parameter value (%.6g).
std::string point_key(const std::string& model, const std::string& device,
                      const std::string& policy, const std::map<std::string, double>& params);

// Now, as ISO 8601 UTC ("2026-11-23T22:15:00Z"): when a file was created, a point finished.
std::string utc_now();

}  // namespace cl::sweep
