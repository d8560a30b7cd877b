// `cachelens-cli generate`: one prompt, one policy, a live terminal view of the unmasking.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "app/cli/jsonl_trace_sink.h"
#include "app/cli/terminal_view.h"
#include "engine/base/errors.h"
#include "engine/base/json_file.h"
#include "engine/generation/generator.h"
#include "sessions/session_writer.h"

namespace cl::cli {
namespace {

struct GenerateOptions {
    ModelOptions model;
    PromptOptions prompt;
    SamplerOptions sampler;
    ParamOptions params;
    std::string policy = "none";
    std::string trace_file;
    std::string record_file;
    int attention_bits = 4;
    AttentionDetailOptions attention;
    std::string json_file;
    std::string view = "auto";
    bool oracle = false;        // a full forward beside the cached one at every step
    bool drift = false;         // the drift probe at every step
    bool no_attention = false;  // record without attention maps
};

int run_generate(const GenerateOptions& o) {
    check_json_writable(o.json_file);  // before the runs that fill it
    auto model = o.model.load();
    o.attention.check_layers_of(*model);
    GenerationRequest req;
    req.prompt_text = o.prompt.text();
    req.chat_template = !o.prompt.no_chat_template;
    req.config = o.sampler.resolve(*model);
    req.policy = o.policy;
    req.params = o.params.for_policy(o.policy);
    req.threads = o.model.threads;

    trace::FanOutSink sinks;
    std::unique_ptr<JsonlTraceSink> jsonl;
    if (!o.trace_file.empty()) {
        std::set<trace::ProbeKind> extra;
        if (o.oracle) extra.insert(trace::ProbeKind::Oracle);
        if (o.drift) extra.insert(trace::ProbeKind::Drift);
        jsonl = std::make_unique<JsonlTraceSink>(o.trace_file, extra);
        sinks.add(jsonl.get());
    }
    std::unique_ptr<sessions::SessionWriter> recorder;
    if (!o.record_file.empty()) {
        try {
            sessions::WriterOptions wo;
            wo.attention_bits = o.attention_bits;
            wo.attention_budget_bytes = o.attention.budget_bytes();
            wo.full_resolution_layers = o.attention.full_resolution_layers();
            wo.attention_means = !o.no_attention;
            wo.want_oracle = o.oracle;
            wo.want_drift = o.drift;
            recorder = sessions::SessionWriter::open(o.record_file, wo);
        } catch (const sessions::SessionError& e) {
            throw InputError(e.what());
        }
        sinks.add(recorder.get());
    }
    Generator gen(model, req, sinks.empty() ? nullptr : &sinks);
    TerminalView view(gen.info(), parse_view_mode(o.view, isatty(STDOUT_FILENO) != 0));
    const auto planned = static_cast<int32_t>(req.config.steps);
    auto summary = gen.run([&](const trace::StepRecord& rec) {
        view.show(rec, planned);
        return true;
    });
    view.finish(summary);
    if (recorder && !recorder->flush())
        throw RuntimeFailure("recording failed: " + recorder->error());
    std::printf("%s\n", summary.final_text.c_str());
    if (!o.json_file.empty()) {
        nlohmann::json j = {
            {"policy", o.policy},
            {"params", gen.info().policy_params},
            {"sampler", gen.info().sampler},
            {"model", model->name()},
            {"model_hash", model->content_hash()},
            {"prompt_tokens", gen.info().prompt_len},
            {"steps", summary.steps},
            {"generated_tokens", summary.generated_tokens},
            {"wall_ms", summary.wall_ms},
            {"tokens_per_s", summary.tokens_per_s},
            {"flops", summary.flops},
            {"flop_ratio", summary.flops > 0 ? summary.flops_full / summary.flops : 0.0},
            {"recompute_fraction", summary.recompute_fraction},
            {"tokens", summary.final_tokens},
            {"text", summary.final_text}};
        write_json_file(o.json_file, j);
    }
    return kOk;
}

}  // namespace

void add_generate_command(CLI::App& root, Runner& run) {
    auto o = std::make_shared<GenerateOptions>();
    auto* cmd = root.add_subcommand(
        "generate", "Generate from a prompt, showing the sequence unmask step by step");
    o->model.add_to(*cmd);
    o->prompt.add_to(*cmd);
    o->sampler.add_to(*cmd);
    o->params.add_to(*cmd);
    cmd->add_option("--policy", o->policy, "Cache policy (see `cachelens-cli policies`)")
        ->capture_default_str();
    cmd->add_option("--trace", o->trace_file,
                    "Write every step record as JSON lines to FILE.jsonl");
    cmd->add_option("--json", o->json_file, "Write the result summary as JSON");
    cmd->add_option("--record", o->record_file,
                    "Record the run into a session file (SQLite; appends to an existing one)");
    add_attention_bits_option(*cmd, o->attention_bits);
    o->attention.add_to(*cmd);
    cmd->add_flag("--oracle", o->oracle,
                  "With --record or --trace: a full forward beside the cached one at every step "
                  "(staleness of reused K/V, logits KL)");
    cmd->add_flag("--drift", o->drift,
                  "With --record or --trace: each computed row's K/V change at every step");
    cmd->add_flag("--no-attention", o->no_attention,
                  "With --record: leave out the attention maps (much smaller files)");
    cmd->add_option("--view", o->view,
                    "Terminal view: auto, live (redraw in place), steps (a line per step), quiet")
        ->capture_default_str();
    cmd->callback([o, &run] { run = [o] { return run_generate(*o); }; });
}

}  // namespace cl::cli
