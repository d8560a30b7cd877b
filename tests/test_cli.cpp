// cachelens-cli as a user runs it: exit codes, one-line errors naming the file, --help everywhere.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "engine/base/errors.h"
#include "test_util.h"

namespace cl {
namespace {

using test::cli;

TEST(Cli, EngineSettingsBecomeFlagsInMessages) {
    const InputError bad(Setting{"gen_length"}, "must be between 1 and 65536, got 0");
    EXPECT_EQ(std::string(bad.what()), "gen_length: must be between 1 and 65536, got 0");
    EXPECT_EQ(cli_message(bad), "--gen-length: must be between 1 and 65536, got 0");
    const InputError file(std::filesystem::path("/m/config.json"), "invalid JSON");
    EXPECT_EQ(cli_message(file), "/m/config.json: invalid JSON");
}

TEST(Cli, InitInspectGenerate) {
    auto dir = test::temp_dir("cli") / "model";
    auto r =
        cli("init-model --out " + dir.string() + " --d-model 32 --layers 2 --heads 4 --shards 2");
    ASSERT_EQ(r.code, 0) << r.out;
    r = cli("inspect-model --model " + dir.string());
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("llada: 2 layers, d_model 32"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("21 in 2 file(s), checked against config.json"), std::string::npos)
        << r.out;
    r = cli("inspect-model --json --model " + dir.string());
    EXPECT_EQ(nlohmann::json::parse(r.out)["tensors"].size(), 21u);
    const auto trace = dir.parent_path() / "trace.jsonl";
    r = cli("generate --model " + dir.string() +
            " --prompt hi --gen-length 8 --block-length 4 --steps 8 --view steps --trace " +
            trace.string());
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("step   8/8"), std::string::npos) << r.out;
    int lines = 0;
    std::ifstream in(trace);
    for (std::string line; std::getline(in, line);) {
        auto j = nlohmann::json::parse(line);
        lines += j["type"] == "step";
    }
    EXPECT_EQ(lines, 8);
}

// A Dream-architecture folder from init-model (sharded) runs under every command that loads one;
// an unknown architecture is refused naming the known ones.
TEST(Cli, InitModelWritesADreamFolderThatGenerates) {
    const auto dir = test::temp_dir("cli-dream") / "model";
    auto r = cli("init-model --arch dream --out " + dir.string() +
                 " --d-model 32 --layers 2 --heads 4 --kv-heads 2 --shards 2");
    ASSERT_EQ(r.code, 0) << r.out;
    r = cli("inspect-model --model " + dir.string());
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("dream: 2 layers, d_model 32, 4 heads (2 kv)"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("shifted logits"), std::string::npos) << r.out;
    r = cli(
        "generate --model " + dir.string() +
        " --prompt hi --gen-length 8 --block-length 4 --steps 8 --policy fast-dual --view quiet");
    EXPECT_EQ(r.code, 0) << r.out;
    r = cli("init-model --arch gpt --out " + (dir.parent_path() / "x").string());
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("known: llada, dream"), std::string::npos) << r.out;
}

TEST(Cli, BadInputExitsTwoWithOneLineNamingTheFile) {
    auto dir = test::temp_dir("cli");
    auto r = cli("inspect-model --model " + (dir / "missing").string());
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find((dir / "missing").string()), std::string::npos) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;

    auto model = dir / "m";
    ASSERT_EQ(cli("init-model --out " + model.string() + " --d-model 32 --layers 1").code, 0);
    test::write_file(model / "model.safetensors", "garbage that is not a safetensors file");
    r = cli("generate --model " + model.string() + " --prompt hi");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("model.safetensors"), std::string::npos) << r.out;
}

// The bench records each CPU's speed before and after each mode's runs
// (engine/machine/core_speeds.h), one entry per mode and per CPU this process may run on, each with
// its probe times in order and its speed against the best; the table says so too.
TEST(Cli, BenchRecordsTheCoreSpeedsAroundEachMode) {
    const auto js = test::temp_dir("cli") / "bench.json";
    const auto r =
        cli("bench --policies none --prompts 1 --repeats 1 --gen-length 32 "
            "--block-length 32 --steps 32 --mode both --json " +
            js.string());
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("core speed (row-kernel probe on each CPU): before cpu"),
              std::string::npos)
        << r.out;
    const auto cores = nlohmann::json::parse(test::read_file(js))["core_speeds"];
    ASSERT_EQ(cores.size(), 2U) << cores.dump();
    EXPECT_EQ(cores[0]["mode"], "cache-only");
    EXPECT_EQ(cores[1]["mode"], "own");
    EXPECT_EQ(cores[0]["after"], cores[1]["before"]) << "one probe between the modes";
    for (const auto& mode : cores)
        for (const char* when : {"before", "after"}) {
            ASSERT_FALSE(mode[when].empty()) << mode.dump();
            for (const auto& cpu : mode[when]) {
                EXPECT_LE(cpu["probe_best_us"].get<double>(), cpu["probe_median_us"].get<double>());
                EXPECT_LE(cpu["probe_median_us"].get<double>(),
                          cpu["probe_worst_us"].get<double>());
                EXPECT_GT(cpu["relative"].get<double>(), 0.0);
                EXPECT_LE(cpu["relative"].get<double>(), 1.0);
                EXPECT_GT(cpu["l3_probe_median_us"].get<double>(), 0.0);
                EXPECT_GT(cpu["l3_slowdown"].get<double>(), 0.0);
            }
        }
}

// --json is checked before the runs that fill it: an unwritable path fails at once (the bench would
// otherwise run for minutes first), a run that fails later leaves no new file behind and an
// existing file as it was.
TEST(Cli, JsonFileCheckedBeforeTheRuns) {
    auto dir = test::temp_dir("cli");
    const auto unwritable = (dir / "no-such-dir" / "bench.json").string();
    auto r = cli("bench --policies none --prompts 1 --json " + unwritable);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find(unwritable + ": cannot open for writing"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("none"), std::string::npos) << "no run before the check: " << r.out;

    const auto fresh = dir / "fresh.json";  // the run fails on its settings, after the check
    r = cli("generate --prompt hi --gen-length 7 --block-length 3 --json " + fresh.string());
    EXPECT_EQ(r.code, 2);
    EXPECT_FALSE(std::filesystem::exists(fresh));

    const auto kept = dir / "kept.json";
    test::write_file(kept, "{\"earlier\": 1}");
    r = cli("generate --prompt hi --gen-length 7 --block-length 3 --json " + kept.string());
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(test::read_file(kept), "{\"earlier\": 1}");
}

// --kernels takes fast or reference (bench also both); a bad CACHELENS_KERNELS is refused naming
// the variable, before any run.
TEST(Cli, ABadKernelSetIsRefusedNamingTheOptionOrTheVariable) {
    auto r = cli("generate --prompt hi --kernels fastest");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("--kernels"), std::string::npos) << r.out;
    EXPECT_EQ(cli("generate --prompt hi --kernels both").code, 2) << "both is bench's only";
    const char* before = std::getenv("CACHELENS_KERNELS");
    const std::string kept = before ? before : "";
    setenv("CACHELENS_KERNELS", "turbo", 1);  // the child's environment
    r = cli("generate --prompt hi --gen-length 8 --block-length 8 --steps 8");
    if (before)
        setenv("CACHELENS_KERNELS", kept.c_str(), 1);
    else
        unsetenv("CACHELENS_KERNELS");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("CACHELENS_KERNELS: 'turbo' is not a kernel set"), std::string::npos)
        << r.out;
}

TEST(Cli, UsageErrorsExitTwo) {
    auto dir = test::temp_dir("cli");
    auto model = dir / "m";
    ASSERT_EQ(cli("init-model --out " + model.string() + " --d-model 32 --layers 1").code, 0);
    EXPECT_EQ(cli("").code, 2);
    EXPECT_EQ(cli("frobnicate").code, 2);
    EXPECT_EQ(cli("generate --model " + model.string() + " --prompt hi --policy nope").code, 2);
    EXPECT_EQ(cli("generate --model " + model.string() + " --prompt hi --param x").code, 2);
    EXPECT_EQ(
        cli("generate --model " + model.string() + " --prompt hi --gen-length 10 --block-length 4")
            .code,
        2);
    EXPECT_EQ(
        cli("generate --model " + model.string() + " --prompt-file " + (dir / "none.txt").string())
            .code,
        2);
    test::write_file(dir / "bad.txt", "caf\xe9");
    auto r =
        cli("generate --model " + model.string() + " --prompt-file " + (dir / "bad.txt").string());
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("UTF-8"), std::string::npos) << r.out;
    EXPECT_EQ(cli("init-model --out " + model.string()).code, 2);  // exists, not empty
    EXPECT_EQ(cli("generate --model " + model.string() + " --prompt hi --device cuda").code, 2);
    // compare's per-column parameters: malformed and out-of-range values are refused up front.
    EXPECT_EQ(
        cli("compare --model " + model.string() + " --prompt hi --policies dkv-decode:delay").code,
        2);
    EXPECT_EQ(
        cli("compare --model " + model.string() + " --prompt hi --policies dkv-decode:delay=7")
            .code,
        2);
    // eval's columns and an unknown policy; the recording precision; the task difficulty.
    r = cli("eval --model " + model.string() + " --policies none,nope --items 1");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("unknown policy 'nope'"), std::string::npos) << r.out;
    EXPECT_EQ(
        cli("eval --model " + model.string() + " --policies dkv-decode:delay=7 --items 1").code, 2);
    r = cli("generate --model " + model.string() + " --prompt hi --record " +
            (dir / "x.clsession").string() + " --attention-bits 5");
    EXPECT_EQ(r.code, 2);
    EXPECT_FALSE(std::filesystem::exists(dir / "x.clsession"));
    // The attention's level of detail: layers that are not layers of the model, a budget that
    // cannot hold one cell per map, each named.
    r = cli("generate --model " + model.string() + " --prompt hi --record " +
            (dir / "y.clsession").string() + " --full-attention-layers 0,x");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("--full-attention-layers: 'x'"), std::string::npos) << r.out;
    r = cli("generate --model " + model.string() + " --prompt hi --record " +
            (dir / "y.clsession").string() + " --full-attention-layers 99");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("layer 99 is past"), std::string::npos) << r.out;
    r = cli("generate --model " + model.string() + " --prompt hi --gen-length 256 --steps 256 " +
            "--record " + (dir / "z.clsession").string() + " --attention-budget 0.001");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("--attention-budget: an attention budget of"), std::string::npos) << r.out;
    r = cli("train --out " + (dir / "t").string() + " --kv-min-pairs 9 --kv-max-pairs 3 --steps 1");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("--kv-min-pairs"), std::string::npos) << r.out;
    // Uniform noise: the update rule, the trainer's noise process, the drift report's inputs.
    r = cli("generate --model " + model.string() + " --prompt hi --update-rule newest");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("--update-rule"), std::string::npos) << r.out;
    r = cli("train --out " + (dir / "u").string() + " --noise absorbing --steps 1");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("--noise"), std::string::npos) << r.out;
    r = cli("drift --model " + model.string() + " --tasks prose --items 1");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("prose"), std::string::npos) << r.out;
    EXPECT_EQ(cli("drift --model " + model.string() + " --items 0").code, 2);
    // Response lengths of the trainer; bench's accuracy items and families.
    r = cli("train --out " + (dir / "p").string() + " --response-pad-max 10 --steps 1");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("--response-pad-max"), std::string::npos) << r.out;
    EXPECT_EQ(cli("train --out " + (dir / "p").string() + " --response-pad 0 --steps 1").code, 2);
    r = cli("bench --model " + model.string() + " --policies none --accuracy-items -1");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("--accuracy-items"), std::string::npos) << r.out;
    r = cli("bench --model " + model.string() +
            " --policies none --accuracy-items 1 --accuracy-tasks prose");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("--accuracy-tasks: 'prose'"), std::string::npos) << r.out;
    EXPECT_EQ(cli("drift --model " + model.string() + " --max-distance 0 --items 1").code, 2);
    // A bad column of --policies is named as --policies (it was "--policy", a flag compare,
    // eval and bench do not have), with the column at fault.
    for (const std::string cmd : {"compare --prompt hi", "eval --items 1", "bench"}) {
        r = cli(cmd + " --model " + model.string() + " --policies none,bogus");
        EXPECT_EQ(r.code, 2) << cmd;
        EXPECT_NE(r.out.find("--policies: unknown policy 'bogus'"), std::string::npos) << r.out;
    }
    r = cli("compare --model " + model.string() + " --prompt hi --policies dkv-decode:delay=7");
    EXPECT_NE(r.out.find("--policies: dkv-decode:delay=7: "), std::string::npos) << r.out;
}

TEST(Cli, HelpForEveryCommand) {
    for (const std::string c :
         {"",           "generate",  "inspect-model", "init-model",      "train",
          "eval",       "drift",     "sweep-steps",   "compare",         "bench",
          "policies",   "sessions",  "sessions list", "sessions export", "replay",
          "sweep",      "sweep run", "sweep worker",  "sweep status",    "sweep frontier",
          "sweep merge"}) {
        auto r = cli(c + " --help");
        EXPECT_EQ(r.code, 0) << c;
        EXPECT_NE(r.out.find("Usage"), std::string::npos) << c << r.out;
    }
}

}  // namespace
}  // namespace cl

namespace cl {
namespace {

TEST(Cli, RecordReplayAndSessionCommands) {
    auto dir = test::temp_dir("cli");
    auto model = dir / "m";
    ASSERT_EQ(cli("init-model --out " + model.string() + " --d-model 32 --layers 2").code, 0);
    const auto session = (dir / "s.clsession").string();
    auto r = cli("compare --model " + model.string() +
                 " --prompt hi --gen-length 8 --block-length 4 --steps 8 "
                 "--policies dkv-decode,fast-dual --record " +
                 session);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("fast-dual"), std::string::npos);
    r = cli("sessions list " + session);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("dkv-decode"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("complete"), std::string::npos) << r.out;
    r = cli("sessions check " + session);
    EXPECT_EQ(r.code, 0) << r.out;
    // The replay prints the same frames as the live view did.
    auto live = cli("generate --model " + model.string() +
                    " --prompt hi --gen-length 8 --block-length 4 --steps 8 "
                    "--view steps --record " +
                    (dir / "g.clsession").string());
    auto replay = cli("replay " + (dir / "g.clsession").string() + " --view steps");
    ASSERT_EQ(replay.code, 0) << replay.out;
    auto frames = [](const std::string& s) {
        std::string out;
        std::istringstream in(s);
        for (std::string line; std::getline(in, line);)
            if (line.rfind("step ", 0) == 0) out += line + "\n";
        return out;
    };
    EXPECT_EQ(frames(replay.out), frames(live.out));
    EXPECT_FALSE(frames(live.out).empty());
    const auto csv = (dir / "steps.csv").string();
    ASSERT_EQ(cli("sessions export " + session + " --format csv --out " + csv).code, 0);
    const std::string csv_text = test::read_file(csv);
    EXPECT_EQ(std::count(csv_text.begin(), csv_text.end(), '\n'), 1 + 3 * 8);
    const auto js = (dir / "all.json").string();
    ASSERT_EQ(cli("sessions export " + session + " --format json --out " + js).code, 0);
    EXPECT_EQ(nlohmann::json::parse(test::read_file(js))["runs"].size(), 3u);
    EXPECT_EQ(cli("sessions delete " + session + " --run 1").code, 0);
    EXPECT_EQ(cli("sessions vacuum " + session).code, 0);
    r = cli("sessions show " + session);
    EXPECT_EQ(r.out.find("\"policy\": \"none\""), std::string::npos) << "run 1 (none) was deleted";
}

// A masked and a uniform-noise model side by side (compare --also-model, one comparison) and
// accuracy against the step count (sweep-steps), both recorded into one session.
TEST(Cli, TwoModelsSideBySideAndAStepSweepInOneSession) {
    auto dir = test::temp_dir("cli");
    const auto masked = dir / "masked", uniform = dir / "uniform";
    ASSERT_EQ(cli("init-model --out " + masked.string() + " --d-model 32 --layers 2").code, 0);
    std::filesystem::copy(masked, uniform);
    auto config = nlohmann::json::parse(test::read_file(uniform / "config.json"));
    config["noise_process"] = "uniform";
    test::write_file(uniform / "config.json", config.dump(2));
    const auto session = (dir / "both.clsession").string();
    const std::string models = " --model " + masked.string() + " --also-model " + uniform.string();
    const std::string sampler = " --gen-length 8 --block-length 4";
    auto r = cli("compare" + models + sampler + " --steps 8 --prompt hi --policies block-cache" +
                 " --json " + (dir / "c.json").string() + " --record " + session);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("block-cache @uniform"), std::string::npos) << r.out;
    const auto runs = nlohmann::json::parse(test::read_file(dir / "c.json"))["runs"];
    ASSERT_EQ(runs.size(), 4u);  // none and block-cache on each model
    EXPECT_EQ(runs[2]["model"], "uniform");
    EXPECT_EQ(runs[2]["policy"], "none");
    r = cli("sweep-steps" + models + sampler + " --step-counts 2,8 --tasks arith --items 2" +
            " --json " + (dir / "s.json").string() + " --record " + session);
    ASSERT_EQ(r.code, 0) << r.out;
    const auto sweep = nlohmann::json::parse(test::read_file(dir / "s.json"));
    ASSERT_EQ(sweep["points"].size(), 4u);  // 2 models x 2 step counts x 1 task
    EXPECT_EQ(sweep["points"][3]["noise_process"], "uniform");
    EXPECT_EQ(sweep["points"][3]["steps"], 8);
    r = cli("sessions list " + session);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("accuracy-vs-steps report: 4 points"), std::string::npos) << r.out;
    r = cli("sessions check " + session);
    EXPECT_EQ(r.code, 0) << r.out;
    // Step counts that are not numbers, not multiples of the block count, or families unscored.
    for (const std::string bad : {" --step-counts 3", " --step-counts 8,x", " --step-counts ,",
                                  " --tasks prose", " --items 0"}) {
        r = cli("sweep-steps" + models + sampler + bad);
        EXPECT_EQ(r.code, 2) << bad << r.out;
    }
    r = cli("sweep-steps" + models + sampler + " --step-counts 3");
    EXPECT_NE(r.out.find("--step-counts: 3 is not a multiple"), std::string::npos) << r.out;
    r = cli("compare --model " + masked.string() + " --also-model " + (dir / "nope").string() +
            " --prompt hi");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("nope"), std::string::npos) << r.out;
}

TEST(Cli, BadSessionFilesExitTwo) {
    auto dir = test::temp_dir("cli");
    test::write_file(dir / "junk.clsession", std::string(4096, 'x'));
    auto r = cli("sessions list " + (dir / "junk.clsession").string());
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("junk.clsession"), std::string::npos) << r.out;
    EXPECT_EQ(cli("replay " + (dir / "missing.clsession").string()).code, 2);
}

}  // namespace
}  // namespace cl
