#include "app/cli/task_scoring.h"

#include <algorithm>
#include <cstdio>

#include "engine/base/errors.h"
#include "engine/base/stats.h"

namespace cl::cli {

void check_scored_families(const std::vector<std::string>& families, const std::string& flag) {
    const auto& known = tasks::all_families();
    for (const auto& f : families)
        if (!tasks::is_scored(f) || std::find(known.begin(), known.end(), f) == known.end())
            throw InputError(flag + ": '" + f +
                             "' is not a scored task family (arith, kv, reverse)");
}

void check_item_count(int items, int max_items) {
    if (items < 1 || items > max_items)
        throw InputError("--items: must be between 1 and " + std::to_string(max_items));
}

ItemOutcome run_task_item(const ScoringSetup& setup, const tasks::TaskItem& item,
                          trace::TraceSink* sink) {
    GenerationRequest req;
    req.prompt_text = item.prompt;
    req.config = setup.config;
    req.policy = setup.policy;
    req.params = setup.params;
    req.threads = setup.threads;
    Generator g(setup.model, req, sink);
    ItemOutcome out;
    out.summary = g.run();
    out.correct = tasks::exact_match(item, out.summary.final_text);
    out.info = g.info();
    return out;
}

double FamilyScore::accuracy() const {
    return correct_items.empty() ? 0.0 : static_cast<double>(correct) / correct_items.size();
}

double FamilyScore::tokens_per_s() const {
    return wall_ms > 0 ? static_cast<double>(tokens) / (wall_ms / 1000.0) : 0.0;
}

FamilyScore score_family(const ScoringSetup& setup, const std::string& family, int items,
                         uint64_t task_seed, bool show, const std::function<void()>& on_item) {
    tasks::TaskGenerator gen(task_seed, tasks::Split::Eval);
    FamilyScore score;
    for (int i = 0; i < items; ++i) {
        const auto item = gen.next(family);
        const auto r = run_task_item(setup, item);
        score.correct_items.push_back(r.correct);
        score.correct += r.correct;
        score.tokens += r.summary.generated_tokens;
        score.wall_ms += r.summary.wall_ms;
        if (show)
            std::printf("  [%s] %s -> %s (expected %s)\n", r.correct ? "ok" : "xx",
                        item.prompt.c_str(), r.summary.final_text.c_str(), item.answer.c_str());
        if (on_item) on_item();
    }
    return score;
}

Paired paired_with(const FamilyScore& score, const std::vector<bool>& baseline_correct) {
    Paired p;
    for (size_t i = 0; i < score.correct_items.size() && i < baseline_correct.size(); ++i) {
        p.fixed += score.correct_items[i] && !baseline_correct[i];
        p.broken += !score.correct_items[i] && baseline_correct[i];
    }
    return p;
}

namespace {
std::string format_p(double p) {
    char buf[16];
    std::snprintf(buf, sizeof buf, p < 0.001 ? "<0.001" : "%.3f", p);
    return buf;
}
}  // namespace

void print_accuracy_header(int label_width) {
    std::printf("%-*s %-8s %6s %9s %15s %9s %7s %9s\n", label_width, "policy", "task", "items",
                "accuracy", "95% interval", "vs none", "p", "tok/s");
}

nlohmann::json accuracy_row(const std::string& label, const std::string& family,
                            const FamilyScore& score, const std::vector<bool>* baseline,
                            int label_width) {
    const int items = static_cast<int>(score.correct_items.size());
    // Wilson score interval: honest about how few items an accuracy rests on.
    const auto [low, high] = stats::wilson_interval(score.correct, items);
    nlohmann::json j{{"policy", label},
                     {"task", family},
                     {"items", items},
                     {"correct", score.correct},
                     {"accuracy", score.accuracy()},
                     {"interval95", {low, high}},
                     {"tokens_per_s", score.tokens_per_s()}};
    std::string vs = "-", p_text = "-";
    if (baseline) {
        const Paired d = paired_with(score, *baseline);
        // p: exact McNemar test of fixed vs broken (is the paired difference more than noise?).
        const double p = stats::paired_exact_p(d.fixed, d.broken);
        vs = std::string("+") + std::to_string(d.fixed) + "/-" + std::to_string(d.broken);
        p_text = format_p(p);
        j["fixed_vs_none"] = d.fixed;
        j["broken_vs_none"] = d.broken;
        j["paired_p"] = p;
    }
    std::printf("%-*s %-8s %6d %8.1f%% %6.1f-%5.1f%% %9s %7s %9.1f\n", label_width, label.c_str(),
                family.c_str(), items, 100 * score.accuracy(), 100 * low, 100 * high, vs.c_str(),
                p_text.c_str(), score.tokens_per_s());
    return j;
}

}  // namespace cl::cli
