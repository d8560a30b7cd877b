// `cachelens-cli sessions list|show|export|delete|vacuum|check` and `replay`: session files
// without a model (docs/session-format.md).
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "app/cli/terminal_view.h"
#include "engine/base/errors.h"
#include "sessions/session_reader.h"

namespace cl::cli {
namespace {

using sessions::SessionReader;

struct SessionsOptions {
    std::vector<std::string> files;
    int64_t run = -1;
    std::string format = "csv";
    std::string out;
};

std::unique_ptr<SessionReader> open_session(const std::string& file, bool repair = true) {
    try {
        return SessionReader::open(file, repair);
    } catch (const sessions::SessionError& e) {
        throw InputError(e.what());
    }
}

void print_runs(SessionReader& r) {
    const auto& i = r.info();
    std::printf("%s  name '%s'  created %s  format v%d  %.1f MB\n", i.path.c_str(), i.name.c_str(),
                i.created_utc.c_str(), i.schema_version, i.file_bytes / 1e6);
    std::printf("  %4s %4s %-12s %-9s %6s %9s %8s  %s\n", "run", "cmp", "policy", "status", "steps",
                "tok/s", "model", "prompt");
    for (const auto& run : r.runs()) {
        std::string prompt = run.info.prompt_text.substr(0, 40);
        for (auto& c : prompt)
            if (c == '\n') c = ' ';
        std::printf("  %4lld %4lld %-12s %-9s %6lld %9.1f %8s  %s\n", (long long)run.run_id,
                    (long long)run.comparison_id, run.info.policy.c_str(),
                    trace::to_string(run.status), (long long)run.step_count,
                    run.summary ? run.summary->tokens_per_s : 0.0, run.info.model_name.c_str(),
                    prompt.c_str());
    }
}

int run_list(const SessionsOptions& o) {
    for (const auto& f : o.files) {
        if (std::filesystem::is_directory(f)) {
            for (const auto& e : std::filesystem::directory_iterator(f))
                if (e.path().extension() == ".clsession" || e.path().extension() == ".db") {
                    try {
                        auto r = SessionReader::open(e.path().string(), false);
                        std::printf("%-50s %-20s %s %3zu runs %8.1f MB\n", e.path().c_str(),
                                    r->info().name.c_str(), r->info().created_utc.c_str(),
                                    r->runs().size(), r->info().file_bytes / 1e6);
                    } catch (const sessions::SessionError& err) {
                        std::printf("%-50s unreadable: %s\n", e.path().c_str(), err.what());
                    }
                }
        } else {
            auto r = open_session(f);
            print_runs(*r);
        }
    }
    return kOk;
}

int run_show(const SessionsOptions& o) {
    auto r = open_session(o.files.at(0));
    for (const auto& run : r->runs()) {
        if (o.run >= 0 && run.run_id != o.run) continue;
        nlohmann::json j = {{"run", run.run_id},
                            {"comparison", run.comparison_id},
                            {"policy", run.info.policy},
                            {"params", run.info.policy_params},
                            {"sampler", run.info.sampler},
                            {"model", run.info.model_name},
                            {"model_hash", run.info.model_hash},
                            {"device", run.info.device},
                            {"threads", run.info.threads},
                            {"seed", run.info.seed},
                            {"status", trace::to_string(run.status)},
                            {"steps", run.step_count},
                            {"app_version", run.info.app_version},
                            {"started", run.started_utc},
                            {"ended", run.ended_utc},
                            {"prompt", run.info.prompt_text},
                            {"note", run.note}};
        if (run.summary)
            j["summary"] = {
                {"generated_tokens", run.summary->generated_tokens},
                {"wall_ms", run.summary->wall_ms},
                {"tokens_per_s", run.summary->tokens_per_s},
                {"flop_ratio",
                 run.summary->flops > 0 ? run.summary->flops_full / run.summary->flops : 0},
                {"recompute_fraction", run.summary->recompute_fraction},
                {"text", run.summary->final_text}};
        std::printf("%s\n", j.dump(2).c_str());
    }
    return kOk;
}

int run_export(const SessionsOptions& o) {
    auto r = open_session(o.files.at(0));
    if (o.out.empty()) throw InputError("--out: an output file is required");
    std::ofstream out(o.out);
    if (!out) throw InputError(o.out, "cannot open for writing");
    if (o.format == "csv") {
        out << "run,policy,step,block,step_in_block,seq_len,n_committed,wall_ms,flops,flops_full,"
               "recompute_fraction,has_oracle\n";
        for (const auto& run : r->runs()) {
            if (o.run >= 0 && run.run_id != o.run) continue;
            for (const auto& m : r->step_meta(run.run_id))
                out << run.run_id << ',' << run.info.policy << ',' << m.step << ',' << m.block
                    << ',' << m.step_in_block << ',' << m.seq_len << ',' << m.n_committed << ','
                    << m.wall_ms << ',' << m.flops << ',' << m.flops_full << ','
                    << m.recompute_fraction << ',' << m.has_oracle << '\n';
        }
    } else if (o.format == "json") {
        nlohmann::json runs = nlohmann::json::array();
        for (const auto& run : r->runs()) {
            if (o.run >= 0 && run.run_id != o.run) continue;
            nlohmann::json steps = nlohmann::json::array();
            for (int32_t s = 0; s < run.step_count; ++s) {
                auto st = r->load_step(run.run_id, s, {-2});
                std::vector<int> actions, states;
                for (auto a : st->actions) actions.push_back(static_cast<int>(a));
                for (auto x : st->states) states.push_back(static_cast<int>(x));
                steps.push_back({{"step", st->step},
                                 {"block", st->block},
                                 {"tokens", st->tokens},
                                 {"states", states},
                                 {"committed", st->committed},
                                 {"actions", actions},
                                 {"wall_ms", st->wall_ms},
                                 {"flops", st->flops},
                                 {"flops_full", st->flops_full},
                                 {"recompute_fraction", st->recompute_fraction()}});
            }
            runs.push_back({{"run", run.run_id},
                            {"policy", run.info.policy},
                            {"params", run.info.policy_params},
                            {"sampler", run.info.sampler},
                            {"prompt", run.info.prompt_text},
                            {"status", trace::to_string(run.status)},
                            {"steps", steps}});
        }
        out << nlohmann::json{{"session", r->info().path}, {"name", r->info().name}, {"runs", runs}}
                   .dump()
            << '\n';
    } else {
        throw InputError("--format: expected csv or json, got '" + o.format + "'");
    }
    if (!out) throw RuntimeFailure(o.out + ": write failed");
    std::printf("wrote %s\n", o.out.c_str());
    return kOk;
}

int run_check(const SessionsOptions& o) {
    int bad = 0;
    for (const auto& f : o.files) {
        auto r = open_session(f);
        auto problems = r->check();
        std::printf("%s: %s (format v%d%s)\n", f.c_str(), problems.empty() ? "ok" : "PROBLEMS",
                    r->info().schema_version,
                    r->info().aborted_on_open ? ", marked interrupted runs aborted" : "");
        for (const auto& p : problems) std::printf("  %s\n", p.c_str());
        bad += !problems.empty();
    }
    return bad ? kBadInput : kOk;
}

struct ReplayOptions {
    std::string file;
    int64_t run = -1;
    int32_t step = -1;
    std::string view = "steps";
};

int run_replay(const ReplayOptions& o) {
    auto r = open_session(o.file);
    bool any = false;
    for (const auto& run : r->runs()) {
        if (o.run >= 0 && run.run_id != o.run) continue;
        any = true;
        std::printf("run %lld: %s (%s)\n", (long long)run.run_id, run.info.policy.c_str(),
                    trace::to_string(run.status));
        TerminalView view(run.info, parse_view_mode(o.view, isatty(STDOUT_FILENO) != 0));
        const int32_t last =
            o.step >= 0 ? std::min<int32_t>(o.step, static_cast<int32_t>(run.step_count) - 1)
                        : static_cast<int32_t>(run.step_count) - 1;
        for (int32_t s = 0; s <= last; ++s)
            view.show(*r->load_step(run.run_id, s, {-2}), run.info.steps);
        if (run.summary && o.step < 0) view.finish(*run.summary);
    }
    if (!any) throw InputError("--run: session has no run " + std::to_string(o.run));
    return kOk;
}

}  // namespace

void add_sessions_commands(CLI::App& root, Runner& run) {
    auto* cmd = root.add_subcommand("sessions",
                                    "List, inspect, export, delete, vacuum or check session files");
    cmd->require_subcommand(1);
    auto add = [&](const char* name, const char* help, int (*fn)(const SessionsOptions&),
                   bool with_run) {
        auto o = std::make_shared<SessionsOptions>();
        auto* sub = cmd->add_subcommand(name, help);
        sub->add_option("files", o->files, "Session file(s) (list also takes folders)")->required();
        if (with_run) sub->add_option("--run", o->run, "Only this run");
        if (std::string(name) == "export") {
            sub->add_option("--format", o->format, "csv (per-step metrics) or json (full records)")
                ->capture_default_str();
            sub->add_option("--out", o->out, "Output file")->required();
        }
        sub->callback([o, fn, &run] { run = [o, fn] { return fn(*o); }; });
    };
    add("list", "Runs of a session file, or session files in a folder", run_list, false);
    add("show", "Everything a run stored to reproduce it, as JSON", run_show, true);
    add("export", "Per-step metrics as CSV, or full records as JSON", run_export, true);
    add("check", "Decode every record and run SQLite's integrity check", run_check, false);
    {
        auto o = std::make_shared<SessionsOptions>();
        auto* sub = cmd->add_subcommand("delete", "Delete one run from a session");
        sub->add_option("files", o->files, "Session file")->required();
        sub->add_option("--run", o->run, "Run to delete")->required();
        sub->callback([o, &run] {
            run = [o] {
                auto r = open_session(o->files.at(0));
                r->delete_run(o->run);
                std::printf("deleted run %lld\n", (long long)o->run);
                return int{kOk};
            };
        });
    }
    {
        auto o = std::make_shared<SessionsOptions>();
        auto* sub = cmd->add_subcommand("vacuum", "Checkpoint the WAL and compact the file");
        sub->add_option("files", o->files, "Session file")->required();
        sub->callback([o, &run] {
            run = [o] {
                for (const auto& f : o->files) open_session(f)->vacuum();
                return int{kOk};
            };
        });
    }
    auto ro = std::make_shared<ReplayOptions>();
    auto* rep = root.add_subcommand(
        "replay", "Render recorded steps in the terminal, as the live view did (no model)");
    rep->add_option("file", ro->file, "Session file")->required();
    rep->add_option("--run", ro->run, "Only this run");
    rep->add_option("--step", ro->step, "Stop at this step");
    rep->add_option("--view", ro->view, "live, steps or quiet")->capture_default_str();
    rep->callback([ro, &run] { run = [ro] { return run_replay(*ro); }; });
}

}  // namespace cl::cli
