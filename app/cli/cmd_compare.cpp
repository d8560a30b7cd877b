// `cachelens-cli compare --policies a,b,c`: one prompt, one seed, every policy side by side, with
// the baseline `none` run first (added when not listed) so speedup and agreement are measured in
// the same process on the same prompt.
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "app/cli/comparison.h"
#include "engine/base/errors.h"
#include "engine/generation/policy_registry.h"
#include "sessions/session_writer.h"

namespace cl::cli {
namespace {

struct CompareOptions {
    ModelOptions model;
    PromptOptions prompt;
    SamplerOptions sampler;
    ParamOptions params;
    std::string policies = "none,dkv-decode,elastic";
    bool own_decoding = false;
    std::string json_file;
    std::string record_file;
    int attention_bits = 4;
    bool oracle = false;
};

int run_compare(const CompareOptions& o) {
    auto model = o.model.load();
    const std::string text = o.prompt.text();
    auto names = split_list(o.policies);
    if (names.empty()) throw InputError("--policies: no policy given");
    for (const auto& n : names)
        resolve_policy_params(parse_column(n).first, parse_column(n).second);  // validate first
    if (std::find(names.begin(), names.end(), "none") == names.end())
        names.insert(names.begin(), "none");
    const GenerationConfig base_cfg = o.sampler.resolve(*model);
    std::vector<PolicyRun> runs;
    int32_t run_id = 0;
    std::unique_ptr<sessions::SessionWriter> recorder;
    if (!o.record_file.empty()) {
        try {
            sessions::WriterOptions wo;
            wo.want_oracle = o.oracle;
            wo.attention_bits = o.attention_bits;
            recorder = sessions::SessionWriter::open(o.record_file, wo);
        } catch (const sessions::SessionError& e) {
            throw InputError(e.what());
        }
    }
    for (const auto& spec : names) {
        const auto [n, params] = column_policy_params(spec, o.params);
        auto cfg = o.own_decoding ? apply_own_decoding(base_cfg, n) : base_cfg;
        runs.push_back(
            run_policy(model, text, cfg, n, params, run_id++, o.model.threads, recorder.get()));
    }
    if (recorder && !recorder->flush())
        throw RuntimeFailure("recording failed: " + recorder->error());
    const PolicyRun& base = runs.front();
    nlohmann::json out = nlohmann::json::array();
    std::printf("%-12s %8s %8s %9s %8s %10s %10s %9s %10s\n", "policy", "steps", "tok/s", "speedup",
                "FLOP-x", "efficiency", "recompute", "agree", "diverges");
    for (const auto& r : runs) {
        const auto m = compare_with_baseline(r, base);
        std::printf(
            "%-12s %8d %8.1f %8.2fx %7.2fx %10.2f %9.1f%% %8.1f%% %10s\n", r.policy.c_str(),
            r.summary.steps, m.tokens_per_s, m.speedup, m.flop_ratio, m.efficiency,
            100 * m.recompute, 100 * m.agreement,
            m.first_divergence < 0 ? "-" : ("step " + std::to_string(m.first_divergence)).c_str());
        out.push_back({{"policy", r.policy},
                       {"params", r.params},
                       {"steps", r.summary.steps},
                       {"tokens_per_s", m.tokens_per_s},
                       {"speedup", m.speedup},
                       {"flop_ratio", m.flop_ratio},
                       {"efficiency", m.efficiency},
                       {"recompute_fraction", m.recompute},
                       {"agreement", m.agreement},
                       {"first_divergence", m.first_divergence},
                       {"wall_ms", r.summary.wall_ms},
                       {"text", r.summary.final_text}});
    }
    std::printf("\n");
    for (const auto& r : runs)
        std::printf("[%s] %s\n", r.policy.c_str(), r.summary.final_text.c_str());
    if (!o.json_file.empty()) {
        write_json_file(
            o.json_file,
            nlohmann::json{{"prompt", text}, {"sampler", base_cfg.to_map()}, {"runs", out}});
    }
    return kOk;
}

}  // namespace

void add_compare_command(CLI::App& root, Runner& run) {
    auto o = std::make_shared<CompareOptions>();
    auto* cmd = root.add_subcommand(
        "compare", "Run several policies on one prompt with one seed and compare them");
    o->model.add_to(*cmd);
    o->prompt.add_to(*cmd);
    o->sampler.add_to(*cmd);
    o->params.add_to(*cmd);
    cmd->add_option("--policies", o->policies,
                    "Comma-separated policies (none is added as the baseline); "
                    "policy:key=value+key=value sets parameters of one column")
        ->capture_default_str();
    cmd->add_flag("--own-decoding", o->own_decoding,
                  "Use each policy's own decoding defaults (e.g. threshold 0.9)");
    cmd->add_option("--json", o->json_file, "Write the comparison as JSON");
    cmd->add_option("--record", o->record_file,
                    "Record every run into a session file (one comparison)");
    add_attention_bits_option(*cmd, o->attention_bits);
    cmd->add_flag("--oracle", o->oracle,
                  "With --record: record the oracle staleness (a full forward beside each step)");
    cmd->callback([o, &run] { run = [o] { return run_compare(*o); }; });
}

}  // namespace cl::cli
