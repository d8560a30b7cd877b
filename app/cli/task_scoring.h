// Generating task items with one policy and scoring them by exact match: what `eval`, `drift` and
// `sweep-steps` share (one definition of how an item is run and judged).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/generation/generator.h"
#include "engine/tasks/task_suite.h"

namespace cl::cli {

// Throws InputError (naming `flag`) unless every family is a scored one (arith, kv, reverse).
void check_scored_families(const std::vector<std::string>& families,
                           const std::string& flag = "--tasks");
// Throws InputError unless 1 <= items <= max_items.
void check_item_count(int items, int max_items);

// One model, sampler and policy: everything but the prompt.
struct ScoringSetup {
    std::shared_ptr<Model> model;
    GenerationConfig config;
    std::string policy = "none";
    std::map<std::string, double> params;
    int threads = 1;
};

struct ItemOutcome {
    bool correct = false;
    trace::RunSummary summary;
    trace::RunInfo info;
};

// Generates one item's response (records go to `sink` when given) and judges it.
ItemOutcome run_task_item(const ScoringSetup& setup, const tasks::TaskItem& item,
                          trace::TraceSink* sink = nullptr);

struct FamilyScore {
    std::vector<bool> correct_items;  // (items) per item, in generation order
    int correct = 0;
    int64_t tokens = 0;  // generated tokens over all items
    double wall_ms = 0;
    double accuracy() const;
    double tokens_per_s() const;
};

// The first `items` eval items of a family (task seed `task_seed`); `show` prints each one.
// `on_item` is called after each item (progress).
FamilyScore score_family(const ScoringSetup& setup, const std::string& family, int items,
                         uint64_t task_seed, bool show = false,
                         const std::function<void()>& on_item = {});

// How a column's verdicts differ from the baseline's on the same items.
struct Paired {
    int fixed = 0, broken = 0;
};
Paired paired_with(const FamilyScore& score, const std::vector<bool>& baseline_correct);

// One accuracy table row (label, task, items, accuracy, Wilson 95% interval, fixed/broken against
// the baseline with the exact McNemar p, tok/s), printed, and its JSON. `baseline` is null for the
// baseline itself. print_accuracy_header() prints the header.
void print_accuracy_header(int label_width = 24);
nlohmann::json accuracy_row(const std::string& label, const std::string& family,
                            const FamilyScore& score, const std::vector<bool>* baseline,
                            int label_width = 24);

}  // namespace cl::cli
