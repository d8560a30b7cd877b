#include "app/cli/sweep_runner.h"

#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>

#include "app/cli/task_scoring.h"
#include "engine/base/errors.h"

namespace cl::cli {
namespace {

std::string host_name() {
    char buf[256] = {};
    return gethostname(buf, sizeof buf - 1) == 0 ? buf : "unknown";
}

ModelOptions model_options(const std::string& model, const std::string& device, int threads) {
    ModelOptions o;
    o.model_dir = model == "default" ? "" : model;
    o.device = device;
    o.threads = threads;
    return o;
}

sweep::ItemResult item_result(const std::string& family, int32_t index, const ItemOutcome& r) {
    sweep::ItemResult it;
    it.family = family;
    it.index = index;
    it.correct = r.correct;
    it.generated = r.summary.generated_tokens;
    it.wall_ms = r.summary.wall_ms;
    it.flops = r.summary.flops;
    it.flops_full = r.summary.flops_full;
    it.prompt_len = r.info.prompt_len;
    it.final_tokens = r.summary.final_tokens;
    return it;
}

sweep::PointResult measure_point(const SweepSpec& spec, const SweepPointSpec& p,
                                 SweepModels& models, int threads) {
    ScoringSetup setup;
    setup.model = models.get(p.model, p.device);
    setup.config = spec.sampler.resolve(*setup.model);
    setup.policy = p.policy;
    setup.params = p.params;
    setup.threads = threads;
    sweep::PointResult out{p.key,    p.index, p.model,     p.device, p.policy,
                           p.params, threads, host_name(), "",       {}};
    for (const auto& family : spec.families) {
        tasks::TaskGenerator gen(spec.task_seed, tasks::Split::Eval);
        for (int i = 0; i < spec.items; ++i)
            out.items.push_back(item_result(family, i, run_task_item(setup, gen.next(family))));
    }
    out.finished_utc = sweep::utc_now();
    return out;
}

}  // namespace

std::shared_ptr<Model> SweepModels::get(const std::string& model, const std::string& device) {
    auto& slot = m_models[{model, device}];
    if (!slot) slot = model_options(model, device, m_threads).load();
    return slot;
}

void check_sweep_models(const SweepSpec& spec, SweepModels& models) {
    for (const auto& m : spec.models)
        for (const auto& d : spec.devices) {
            auto model = models.get(m, d);
            const auto c = spec.sampler.resolve(*model);
            c.validate(model->config().max_sequence_length, 0);
        }
}

int run_sweep_worker(const SweepSpec& spec, const std::vector<SweepPointSpec>& points,
                     sweep::SweepStore& store, const SweepWorkerOptions& o, SweepModels& models) {
    std::vector<std::pair<int32_t, std::string>> mine;
    for (const auto& p : points)
        if (p.index % o.of == o.shard) mine.emplace_back(p.index, p.key);
    int ran = 0;
    while (auto idx = store.claim_next(mine, o.name)) {
        const auto& p = points.at(static_cast<size_t>(*idx));
        const auto result = measure_point(spec, p, models, o.threads);
        store.add_point(result);
        ++ran;
        if (o.progress)
            std::printf("  [%s] point %d: %s\n", o.name.c_str(), p.index, p.key.c_str());
    }
    return ran;
}

}  // namespace cl::cli
