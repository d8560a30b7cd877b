// `cachelens-cli sessions list|show|export|delete|vacuum|check` and `replay`: session files
// without a model (docs/session-format.md).
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "app/cli/terminal_view.h"
#include "engine/base/errors.h"
#include "sessions/record_schema.h"
#include "sessions/session_reader.h"
#include "sessions/step_csv.h"

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

void print_run_row(const sessions::RunRecord& run) {
    std::string prompt = run.info.prompt_text.substr(0, 40);
    std::replace(prompt.begin(), prompt.end(), '\n', ' ');
    const double tokens_per_s = run.summary ? run.summary->tokens_per_s : 0.0;
    std::printf("  %4lld %4lld %-12s %-9s %6lld %9.1f %8s  %s\n", (long long)run.run_id,
                (long long)run.comparison_id, run.info.policy.c_str(), trace::to_string(run.status),
                (long long)run.step_count, tokens_per_s, run.info.model_name.c_str(),
                prompt.c_str());
}

void print_runs(SessionReader& r) {
    const auto& i = r.info();
    std::printf("%s  name '%s'  created %s  format v%d  %.1f MB\n", i.path.c_str(), i.name.c_str(),
                i.created_utc.c_str(), i.schema_version, i.file_bytes / 1e6);
    std::printf("  %4s %4s %-12s %-9s %6s %9s %8s  %s\n", "run", "cmp", "policy", "status", "steps",
                "tok/s", "model", "prompt");
    for (const auto& run : r.runs()) print_run_row(run);
    // What the app shows side by side: a run made once can sit in several comparisons.
    std::printf("  %4s %-20s %s\n", "cmp", "created", "runs by column");
    for (const auto& c : r.comparisons()) {
        std::string ids;
        for (int64_t id : c.run_ids) {
            if (!ids.empty()) ids += ' ';
            ids += std::to_string(id);
        }
        std::printf("  %4lld %-20s %s\n", (long long)c.comparison_id, c.created_utc.c_str(),
                    ids.c_str());
    }
    try {
        for (const auto& sweep : r.accuracy_sweeps())
            std::printf("  accuracy-vs-steps report: %zu points, policy %s, G=%d, B=%d\n",
                        sweep.points.size(), sweep.policy.c_str(), sweep.gen_len, sweep.block_len);
    } catch (const sessions::SessionError& e) {
        throw InputError(e.what());
    }
}

int run_list(const SessionsOptions& o) {
    for (const auto& f : o.files) {
        if (std::filesystem::is_directory(f)) {
            for (const auto& e : std::filesystem::directory_iterator(f))
                if (e.path().extension() == ".clsession" || e.path().extension() == ".db") {
                    try {
                        auto r = SessionReader::open(e.path().string(), false);
                        std::printf("%-50s %-20s %s %3zu runs %3zu comparisons %8.1f MB\n",
                                    e.path().c_str(), r->info().name.c_str(),
                                    r->info().created_utc.c_str(), r->runs().size(),
                                    r->comparisons().size(), r->info().file_bytes / 1e6);
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

// A run as JSON: the session's bookkeeping plus the record's own JSON form (record_schema.h);
// `brief` leaves out the per-token arrays for reading on a terminal.
nlohmann::json run_json(const sessions::RunRecord& run, bool brief) {
    nlohmann::json j = sessions::to_json(run.info);
    if (brief) {
        j.erase("initial_tokens");
        j.erase("token_text");
    }
    j["comparison_id"] = run.comparison_id;
    j["status"] = trace::to_string(run.status);
    j["step_count"] = run.step_count;
    j["started_utc"] = run.started_utc;
    j["ended_utc"] = run.ended_utc;
    j["note"] = run.note;
    if (run.summary) {
        j["summary"] = sessions::to_json(*run.summary);
        if (brief) j["summary"].erase("final_tokens");
    }
    return j;
}

int run_show(const SessionsOptions& o) {
    auto r = open_session(o.files.at(0));
    for (const auto& run : r->runs())
        if (o.run < 0 || run.run_id == o.run)
            std::printf("%s\n", run_json(run, true).dump(2).c_str());
    return kOk;
}

void export_csv(SessionReader& r, int64_t only_run, std::ostream& out) {
    sessions::write_step_csv_header(out);
    for (const auto& run : r.runs())
        if (only_run < 0 || run.run_id == only_run)
            for (const auto& scalars : r.step_scalars(run.run_id))
                sessions::write_step_csv_row(out, run.run_id, run.info.policy, scalars);
}

void export_json(SessionReader& r, int64_t only_run, std::ostream& out) {
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& run : r.runs()) {
        if (only_run >= 0 && run.run_id != only_run) continue;
        nlohmann::json steps = nlohmann::json::array();
        for (int32_t s = 0; s < run.step_count; ++s)
            steps.push_back(sessions::to_json(*r.load_step(run.run_id, s, {-2}), false));
        nlohmann::json j = run_json(run, false);
        j["steps"] = std::move(steps);
        runs.push_back(std::move(j));
    }
    out << nlohmann::json{{"session", r.info().path}, {"name", r.info().name}, {"runs", runs}}
               .dump()
        << '\n';
}

int run_export(const SessionsOptions& o) {
    auto r = open_session(o.files.at(0));
    if (o.out.empty()) throw InputError("--out: an output file is required");
    if (o.format != "csv" && o.format != "json")
        throw InputError("--format: expected csv or json, got '" + o.format + "'");
    std::ofstream out(o.out);
    if (!out) throw InputError(o.out, "cannot open for writing");
    if (o.format == "csv")
        export_csv(*r, o.run, out);
    else
        export_json(*r, o.run, out);
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

// Prints one run's steps up to --step (all, then its summary, without it).
void replay_run(SessionReader& r, const sessions::RunRecord& run, const ReplayOptions& o) {
    std::printf("run %lld: %s (%s)\n", (long long)run.run_id, run.info.policy.c_str(),
                trace::to_string(run.status));
    TerminalView view(run.info, parse_view_mode(o.view, isatty(STDOUT_FILENO) != 0));
    const int32_t final_step = static_cast<int32_t>(run.step_count) - 1;
    const int32_t last = o.step >= 0 ? std::min<int32_t>(o.step, final_step) : final_step;
    for (int32_t s = 0; s <= last; ++s)
        view.show(*r.load_step(run.run_id, s, {-2}), run.info.steps);
    if (run.summary && o.step < 0) view.finish(*run.summary);
}

int run_replay(const ReplayOptions& o) {
    auto r = open_session(o.file);
    bool any = false;
    for (const auto& run : r->runs()) {
        if (o.run >= 0 && run.run_id != o.run) continue;
        any = true;
        replay_run(*r, run, o);
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
    cmd->add_subcommand("schema",
                        "Print the record fields of the session format (docs/session-format.md)")
        ->callback([&run] {
            run = [] {
                std::printf("%s", sessions::schema_markdown().c_str());
                return int{kOk};
            };
        });
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
