// `cachelens-cli sweep` as a user runs it: bad specs are refused naming the field and write
// nothing; the same spec gives the same accuracy; a sweep killed with SIGKILL resumes without
// losing a finished point.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/cli/sweep_spec.h"
#include "cli_util.h"
#include "engine/base/errors.h"
#include "sweep/sweep_store.h"
#include "test_util.h"

extern char** environ;

namespace cl {
namespace {

using nlohmann::json;
using test::cli;

json base_spec() {
    return {{"format", "cachelens-sweep"},
            {"version", 1},
            {"name", "test"},
            {"tasks", {{"families", {"arith"}}, {"items", 2}, {"seed", 3}}},
            {"sampler", {{"gen_length", 16}, {"block_length", 8}, {"steps", 16}}},
            {"policies",
             {{{"policy", "dkv-decode"}, {"params", {{"refresh_interval", {2, 4}}}}},
              {{"policy", "elastic"},
               {"sampling", "lhs"},
               {"points", 2},
               {"params", {{"gamma", {{"min", 0.5}, {"max", 0.95}}}}}}}}};
}

std::string write_spec(const std::filesystem::path& dir, const json& spec,
                       const std::string& name = "spec.json") {
    test::write_file(dir / name, spec.dump(2));
    return (dir / name).string();
}

// key -> point JSON from `sweep frontier --json`.
std::map<std::string, json> frontier_points(const std::filesystem::path& results,
                                            const std::filesystem::path& json_out) {
    const auto r = cli("sweep frontier " + results.string() + " --json " + json_out.string());
    EXPECT_EQ(r.code, 0) << r.out;
    std::map<std::string, json> out;
    const json all = json::parse(test::read_file(json_out));
    for (const auto& p : all["points"]) out[p["key"].get<std::string>()] = p;
    return out;
}

TEST(CliSweep, BadSpecsNameTheFieldAndWriteNothing) {
    const auto dir = test::temp_dir("sweep");
    const auto out = dir / "r.clsweep";
    struct Case {
        std::function<void(json&)> edit;
        std::string expected;
    };
    const std::vector<Case> cases = {
        {[](json& j) { j["policies"][0]["policy"] = "nope"; }, "policies[0].policy"},
        {[](json& j) {
             j["policies"][0]["params"] = {{"gama", {1}}};
         },
         "policies[0].params.gama"},
        {[](json& j) {
             j["policies"][0]["params"]["refresh_interval"] = {2, 5000};
         },
         "policies[0].params.refresh_interval[1]"},
        {[](json& j) { j["policies"][0]["params"]["refresh_interval"] = json::array(); },
         "empty list"},
        {[](json& j) {
             j["policies"][1]["params"]["gamma"] = {{"min", 0.9}, {"max", 0.1}};
         },
         "min is greater than max"},
        {[](json& j) { j["policies"][1].erase("points"); }, "policies[1].points"},
        {[](json& j) { j["tasks"]["families"] = {"prose"}; }, "tasks.families"},
        {[](json& j) { j["tasks"]["items"] = 0; }, "tasks.items"},
        {[](json& j) { j["colour"] = "blue"; }, "colour: unknown field"},
        {[](json& j) { j["version"] = 2; }, "version"},
        {[](json& j) { j["sampler"]["block_length"] = 5; }, "block"},
        {[](json& j) { j["sampler"]["fresh_prefix"] = "sys"; }, "sampler.fresh_prefix"},
        {[](json& j) { j["sampler"]["fresh_prefix"] = -3; }, "sampler.fresh_prefix"},
    };
    for (const auto& c : cases) {
        json spec = base_spec();
        c.edit(spec);
        const auto file = write_spec(dir, spec);
        const auto r = cli("sweep run " + file + " --out " + out.string());
        EXPECT_EQ(r.code, 2) << r.out;
        EXPECT_NE(r.out.find(c.expected), std::string::npos) << r.out;
        EXPECT_FALSE(std::filesystem::exists(out)) << c.expected;
    }
    test::write_file(dir / "broken.json", "{\"format\": \"cachelens-sweep\", ");
    const auto r = cli("sweep run " + (dir / "broken.json").string() + " --out " + out.string());
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("broken.json: not valid JSON"), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_EQ(cli("sweep status " + (dir / "broken.json").string()).code, 2);
}

// Every value of the documented spec (at every depth) replaced by values of every type and by
// extremes, or removed: the spec parses and expands into a bounded number of points, or fails
// with an InputError naming the file (structured mutation: the parser is torch-linked, so
// libFuzzer cannot build it; tests/fuzz/CMakeLists.txt).
void mutate_every_value(const json& spec, const json::json_pointer& at,
                        const std::function<void(const json&, const std::string&)>& check) {
    static const std::vector<json> values = {nullptr,
                                             -1,
                                             0,
                                             1,
                                             2,
                                             1ll << 40,
                                             -(1ll << 40),
                                             1e308,
                                             0.5,
                                             -0.5,
                                             "",
                                             "grid",
                                             "lhs",
                                             "dkv-decode",
                                             true,
                                             json::array(),
                                             json::array({0, 1}),
                                             json::object(),
                                             json::object({{"min", 1}, {"max", 0}}),
                                             json::object({{"min", 0}, {"max", 1e308}})};
    const json& here = spec.at(at);
    for (const auto& v : values) {
        json j = spec;
        j.at(at) = v;
        check(j, at.to_string() + " = " + v.dump());
    }
    if (!at.empty()) {
        json j = spec;
        json& parent = j.at(at.parent_pointer());
        if (parent.is_object())
            parent.erase(at.back());
        else
            parent.erase(static_cast<size_t>(std::stoul(at.back())));
        check(j, at.to_string() + " removed");
    }
    if (here.is_object())
        for (const auto& [key, unused] : here.items()) mutate_every_value(spec, at / key, check);
    if (here.is_array())
        for (size_t i = 0; i < here.size(); ++i) mutate_every_value(spec, at / i, check);
}

TEST(CliSweep, EverySpecValueMutatedParsesOrNamesTheFile) {
    const json spec = json::parse(
        test::read_file(std::filesystem::path(CL_SOURCE_DIR) / "docs/sweeps/frontier.json"));
    int parsed = 0, refused = 0;
    size_t most_points = 0;
    mutate_every_value(spec, json::json_pointer(), [&](const json& j, const std::string& what) {
        try {
            const auto s = ::cl::cli::parse_sweep_spec(j, "spec.json");
            const auto points = ::cl::cli::expand_points(s);
            most_points = std::max(most_points, points.size());
            EXPECT_FALSE(points.empty()) << what;
            ++parsed;
        } catch (const InputError& e) {
            ++refused;
            EXPECT_NE(std::string(e.what()).find("spec.json"), std::string::npos)
                << what << ": " << e.what();
        } catch (const std::exception& e) {
            ADD_FAILURE() << what << ": not an InputError: " << e.what();
        }
    });
    std::printf("spec mutations: %d parsed (at most %zu points), %d refused with the file named\n",
                parsed, most_points, refused);
    EXPECT_GT(refused, 200);
    EXPECT_LE(most_points, 100000u) << "a spec expands into a bounded number of points";
}

TEST(CliSweep, BadCommandLinesAndFilesExitTwo) {
    const auto dir = test::temp_dir("sweep");
    const auto spec = write_spec(dir, base_spec());
    const auto out = (dir / "r.clsweep").string();
    auto r = cli("sweep worker " + spec + " --out " + out + " --shard 2 --of 2");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("--shard"), std::string::npos) << r.out;
    test::write_file(dir / "exists.clsweep", "x");
    r = cli("sweep run " + spec + " --out " + (dir / "exists.clsweep").string() +
            " --executor slurm --no-submit");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("exists already"), std::string::npos) << r.out;
    r = cli("sweep merge --out " + out + " " + (dir / "missing").string());
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("missing: no such file"), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_EQ(cli("sweep frontier " + (dir / "exists.clsweep").string()).code, 2);
    EXPECT_EQ(cli("sweep run " + spec + " --out " + out + " --workers 0").code, 2);
}

TEST(CliSweep, TheSameSpecGivesTheSameAccuracyAndAResumeRunsNothingTwice) {
    const auto dir = test::temp_dir("sweep");
    const auto spec = write_spec(dir, base_spec());
    auto r = cli("sweep run " + spec + " --out " + (dir / "a.clsweep").string());
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("5 of 5 points finished"), std::string::npos) << r.out;  // none + 2 + 2
    r = cli("sweep run " + spec + " --out " + (dir / "b.clsweep").string() + " --workers 2");
    ASSERT_EQ(r.code, 0) << r.out;
    const auto a = frontier_points(dir / "a.clsweep", dir / "a.json");
    const auto b = frontier_points(dir / "b.clsweep", dir / "b.json");
    ASSERT_EQ(a.size(), 5u);
    ASSERT_EQ(b.size(), 5u);
    for (const auto& [key, p] : a) {
        ASSERT_TRUE(b.count(key)) << key;
        EXPECT_EQ(p["correct"], b.at(key)["correct"]) << key;
        EXPECT_EQ(p["agreement"], b.at(key)["agreement"]) << key;
    }
    r = cli("sweep run " + spec + " --out " + (dir / "a.clsweep").string());
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("5 finished before"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("[w0] point"), std::string::npos) << r.out;
    // A glob over shards also matches SQLite's companions of a file being written: status and
    // merge skip them when their database is listed too (status failed on a "-shm" file).
    test::write_file(dir / "a.clsweep-shm", std::string(64, '\0'));
    test::write_file(dir / "a.clsweep-wal", "");
    r = cli("sweep status " + (dir / "a.clsweep").string() + " " +
            (dir / "a.clsweep-shm").string() + " " + (dir / "a.clsweep-wal").string());
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("5 of 5 points finished"), std::string::npos) << r.out;
    std::filesystem::remove(dir / "a.clsweep-shm");
    std::filesystem::remove(dir / "a.clsweep-wal");
    json other = base_spec();
    other["tasks"]["items"] = 3;
    r = cli("sweep run " + write_spec(dir, other, "other.json") + " --out " +
            (dir / "a.clsweep").string());
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.out.find("another spec"), std::string::npos) << r.out;
}

TEST(CliSweep, TheDocumentedSpecIsValidAndASlurmArrayIsWrittenForIt) {
    const auto dir = test::temp_dir("sweep");
    const std::string doc =
        test::read_file(std::filesystem::path(CL_SOURCE_DIR) / "docs" / "sweep-format.md");
    const auto begin = doc.find("```json\n"), end = doc.find("```", begin + 8);
    ASSERT_NE(begin, std::string::npos);
    test::write_file(dir / "doc.json", doc.substr(begin + 8, end - begin - 8));
    const auto out = dir / "doc.clsweep";
    const auto r = cli("sweep run " + (dir / "doc.json").string() + " --out " + out.string() +
                       " --executor slurm --workers 4 --threads 2 --no-submit");
    ASSERT_EQ(r.code, 0) << r.out;
    const auto script = test::read_file(dir / "doc.clsweep.slurm" / "job.sh");
    EXPECT_NE(script.find("#SBATCH --array=0-3"), std::string::npos) << script;
    EXPECT_NE(script.find("#SBATCH --cpus-per-task=2"), std::string::npos) << script;
    EXPECT_NE(script.find("--shard $SLURM_ARRAY_TASK_ID --of 4"), std::string::npos) << script;
    EXPECT_FALSE(std::filesystem::exists(out));  // written by --wait or sweep merge only
}

pid_t start_cli(const std::vector<std::string>& args) {
    std::vector<std::string> all = {CL_CLI_PATH};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t quiet;
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    EXPECT_EQ(posix_spawn(&pid, CL_CLI_PATH, &quiet, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&quiet);
    return pid;
}

size_t finished_points(const std::filesystem::path& results) {
    try {
        return sweep::SweepStore::open(results.string())->finished_keys().size();
    } catch (const sweep::SweepFileError&) {
        return 0;  // not created yet
    }
}

TEST(CliSweep, AKilledSweepResumesWithoutLosingAFinishedPoint) {
    const auto dir = test::temp_dir("sweep");
    json spec = base_spec();
    spec["sampler"] = {{"gen_length", 32}, {"block_length", 16}, {"steps", 32}};
    spec["tasks"]["items"] = 3;  // the embedded model: about a second per point
    const auto file = write_spec(dir, spec);
    const auto out = dir / "k.clsweep";
    const pid_t pid = start_cli({"sweep", "run", file, "--out", out.string()});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (finished_points(out) < 2 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    waitpid(pid, &status, 0);
    const auto before = frontier_points(out, dir / "before.json");
    ASSERT_GE(before.size(), 2u);
    ASSERT_LT(before.size(), 5u) << "the sweep finished before it could be killed";
    const auto r = cli("sweep run " + file + " --out " + out.string());
    ASSERT_EQ(r.code, 0) << r.out;
    size_t measured = 0;  // points this run measured: only the ones not finished before
    for (size_t at = r.out.find("[w0] point"); at != std::string::npos;
         at = r.out.find("[w0] point", at + 1))
        ++measured;
    EXPECT_EQ(measured, 5 - before.size()) << r.out;
    const auto after = frontier_points(out, dir / "after.json");
    EXPECT_EQ(after.size(), 5u);
    for (const auto& [key, p] : before)  // kept as they were, not measured again
        EXPECT_EQ(after.at(key)["finished_utc"], p["finished_utc"]) << key;
}

}  // namespace
}  // namespace cl
