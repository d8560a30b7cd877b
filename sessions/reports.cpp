#include "sessions/reports.h"

#include "engine/base/json_int.h"

namespace cl::sessions {
namespace {

using nlohmann::json;

json point_json(const trace::AccuracyPoint& p) {
    return {{"model", p.model},
            {"noise_process", p.noise_process},
            {"task", p.task},
            {"steps", p.steps},
            {"items", p.items},
            {"correct", p.correct},
            {"accuracy", p.accuracy()},
            {"interval95", {p.low, p.high}},
            {"tokens_per_s", p.tokens_per_s}};
}

trace::AccuracyPoint point_from_json(const json& j) {
    trace::AccuracyPoint p;
    p.model = j.at("model").get<std::string>();
    p.noise_process = j.at("noise_process").get<std::string>();
    p.task = j.at("task").get<std::string>();
    p.steps = json_int<int32_t>(j.at("steps"));
    p.items = json_int<int32_t>(j.at("items"));
    p.correct = json_int<int32_t>(j.at("correct"));
    const auto& ci = j.at("interval95");
    p.low = ci.at(0).get<double>();
    p.high = ci.at(1).get<double>();
    p.tokens_per_s = j.value("tokens_per_s", 0.0);
    if (p.steps < 1 || p.items < 1 || p.correct < 0 || p.correct > p.items)
        throw std::invalid_argument("point with steps " + std::to_string(p.steps) + ", items " +
                                    std::to_string(p.items) + ", correct " +
                                    std::to_string(p.correct));
    return p;
}

}  // namespace

json to_json(const trace::AccuracySweep& sweep) {
    json points = json::array();
    for (const auto& p : sweep.points) points.push_back(point_json(p));
    return {{"kind", kAccuracySweepKind},   {"policy", sweep.policy},
            {"gen_length", sweep.gen_len},  {"block_length", sweep.block_len},
            {"task_seed", sweep.task_seed}, {"points", points}};
}

trace::AccuracySweep accuracy_sweep_from_json(const json& j, const std::string& where) {
    try {
        trace::AccuracySweep s;
        s.policy = j.at("policy").get<std::string>();
        s.gen_len = json_int<int32_t>(j.at("gen_length"));
        s.block_len = json_int<int32_t>(j.at("block_length"));
        s.task_seed = json_int_or<uint64_t>(j, "task_seed", 1);
        for (const auto& p : j.at("points")) s.points.push_back(point_from_json(p));
        return s;
    } catch (const std::exception& e) {
        throw SessionError(where + ": malformed accuracy sweep: " + e.what());
    }
}

void insert_report(Db& db, const std::string& kind, const std::string& body) {
    Stmt s(db,
           "INSERT INTO report(kind, body, created_utc) VALUES (?, ?, "
           "strftime('%Y-%m-%dT%H:%M:%SZ','now'))");
    s.bind(1, kind).bind(2, body).run();
}

std::vector<trace::AccuracySweep> read_accuracy_sweeps(const Db& db) {
    std::vector<trace::AccuracySweep> out;
    Stmt exists(db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='report'");
    if (!exists.step() || exists.col_int(0) == 0) return out;
    Stmt s(db, "SELECT id, body FROM report WHERE kind = ? ORDER BY id");
    s.bind(1, std::string(kAccuracySweepKind));
    while (s.step()) {
        const std::string where = db.path() + " (report " + std::to_string(s.col_int(0)) + ")";
        const json body = json::parse(s.col_text(1), nullptr, /*allow_exceptions=*/false);
        if (body.is_discarded()) throw SessionError(where + ": report body is not JSON");
        out.push_back(accuracy_sweep_from_json(body, where));
    }
    return out;
}

}  // namespace cl::sessions
