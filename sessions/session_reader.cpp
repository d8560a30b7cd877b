#include "sessions/session_reader.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "sessions/blob_codec.h"
#include "sessions/schema.h"

namespace cl::sessions {

using json = nlohmann::json;

namespace {

trace::RunStatus parse_status(const std::string& s) {
    if (s == "complete") return trace::RunStatus::Complete;
    if (s == "aborted") return trace::RunStatus::Aborted;
    return trace::RunStatus::Running;
}

std::map<int32_t, std::string> parse_token_text(const std::string& text, const std::string& where) {
    std::map<int32_t, std::string> out;
    if (text.empty()) return out;
    try {
        auto j = json::parse(text);
        for (auto it = j.begin(); it != j.end(); ++it)
            out[std::stoi(it.key())] = it->get<std::string>();
    } catch (const std::exception& e) {
        throw SessionError(where + ": corrupt token text: " + e.what());
    }
    return out;
}

json parse_json(const std::string& text, const std::string& where) {
    try {
        return text.empty() ? json::object() : json::parse(text);
    } catch (const std::exception& e) {
        throw SessionError(where + ": corrupt JSON column: " + e.what());
    }
}

}  // namespace

std::unique_ptr<SessionReader> SessionReader::open(const std::string& path, bool repair) {
    return std::unique_ptr<SessionReader>(new SessionReader(path, repair));
}

SessionReader::SessionReader(const std::string& path, bool repair) {
    if (!std::filesystem::exists(path)) throw SessionError(path + ": session file not found");
    if (std::filesystem::is_directory(path))
        throw SessionError(path + ": is a folder, not a session file");
    m_info.path = path;
    m_info.file_bytes = static_cast<int64_t>(std::filesystem::file_size(path));
    if (m_info.file_bytes < 512)
        throw SessionError(path + ": truncated or empty file, not a CacheLens session");
    if (repair) {
        try {
            m_db = Db(path, SQLITE_OPEN_READWRITE);
            m_writable = true;
        } catch (const SessionError&) {
            m_writable = false;
        }
    }
    if (!m_writable) m_db = Db(path, SQLITE_OPEN_READONLY);
    m_info.schema_version_found = m_writable ? check_and_migrate(m_db, true) : check_version(m_db);
    if (!m_writable && m_info.schema_version_found != kCurrentSchema)
        throw SessionError(path + ": session format v" +
                           std::to_string(m_info.schema_version_found) +
                           " needs a migration, but the file is read-only");
    m_info.schema_version = kCurrentSchema;
    {
        Stmt s(m_db, "SELECT key, value FROM meta");
        while (s.step()) {
            const auto k = s.col_text(0);
            if (k == "name")
                m_info.name = s.col_text(1);
            else if (k == "created_utc")
                m_info.created_utc = s.col_text(1);
            else if (k == "app_version")
                m_info.app_version = s.col_text(1);
        }
    }
    // A recorder that died mid-run leaves 'running' rows: they are aborted now.
    if (m_writable) {
        Stmt s(m_db, "UPDATE run SET status = 'aborted' WHERE status = 'running'");
        s.run();
        m_info.aborted_on_open = sqlite3_changes(m_db.get());
    }
}

std::vector<RunRecord> SessionReader::runs() {
    std::vector<RunRecord> out;
    Stmt s(m_db,
           "SELECT run_id, comparison_id, policy, params_json, sampler_json, model_name, "
           "model_hash, device, threads, seed,"
           " prompt, prompt_len, gen_len, block_len, steps_planned, n_layers, n_heads, mask_id, "
           "eos_id, app_version,"
           " token_text_json, status, started_utc, ended_utc, summary_json, note,"
           " (SELECT count(*) FROM step WHERE step.run_id = run.run_id) FROM run ORDER BY run_id");
    while (s.step()) {
        RunRecord r;
        r.run_id = s.col_int(0);
        r.comparison_id = s.col_int(1);
        const std::string where = m_info.path + ": run " + std::to_string(r.run_id);
        auto& i = r.info;
        i.run_id = static_cast<int32_t>(r.run_id);
        i.policy = s.col_text(2);
        const json params = parse_json(s.col_text(3), where),
                   sampler = parse_json(s.col_text(4), where);
        for (const auto& [k, v] : params.items())
            i.policy_params[k] = v.is_string() ? v.get<std::string>() : v.dump();
        for (const auto& [k, v] : sampler.items())
            i.sampler[k] = v.is_string() ? v.get<std::string>() : v.dump();
        i.model_name = s.col_text(5);
        i.model_hash = s.col_text(6);
        i.device = s.col_text(7);
        i.threads = static_cast<int32_t>(s.col_int(8));
        i.seed = static_cast<uint64_t>(s.col_int(9));
        i.prompt_text = s.col_text(10);
        i.prompt_len = static_cast<int32_t>(s.col_int(11));
        i.gen_len = static_cast<int32_t>(s.col_int(12));
        i.block_len = static_cast<int32_t>(s.col_int(13));
        i.steps = static_cast<int32_t>(s.col_int(14));
        i.n_layers = static_cast<int32_t>(s.col_int(15));
        i.n_heads = static_cast<int32_t>(s.col_int(16));
        i.mask_id = static_cast<int32_t>(s.col_int(17));
        i.eos_id = static_cast<int32_t>(s.col_int(18));
        i.app_version = s.col_text(19);
        i.token_text = parse_token_text(s.col_text(20), where);
        r.status = parse_status(s.col_text(21));
        r.started_utc = s.col_text(22);
        r.ended_utc = s.col_text(23);
        if (!s.col_null(24)) {
            auto j = parse_json(s.col_text(24), where);
            trace::RunSummary sum;
            sum.status = r.status;
            sum.steps = j.value("steps", 0);
            sum.generated_tokens = j.value("generated_tokens", 0);
            sum.wall_ms = j.value("wall_ms", 0.0);
            sum.tokens_per_s = j.value("tokens_per_s", 0.0);
            sum.flops = j.value("flops", 0.0);
            sum.flops_full = j.value("flops_full", 0.0);
            sum.recompute_fraction = j.value("recompute_fraction", 0.0);
            sum.final_tokens = j.value("final_tokens", std::vector<int32_t>{});
            sum.final_text = j.value("final_text", std::string());
            r.summary = sum;
        }
        r.note = s.col_text(25);
        r.step_count = s.col_int(26);
        // Initial tokens are stored as an array at step -1.
        Stmt a(m_db,
               "SELECT dtype, shape, encoding, data FROM array WHERE run_id = ? AND step = -1 AND "
               "name = 'initial_tokens'");
        a.bind(1, r.run_id);
        if (a.step()) {
            try {
                i.initial_tokens = decode_array<int32_t>(
                    a.col_text(0), a.col_text(1), a.col_text(2), a.col_blob(3), a.col_bytes(3));
            } catch (const SessionError& e) {
                throw SessionError(where + ": initial tokens: " + e.what());
            }
        }
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<StepMeta> SessionReader::step_meta(int64_t run_id) {
    std::vector<StepMeta> out;
    Stmt s(m_db,
           "SELECT step, block, step_in_block, seq_len, n_layers, n_committed, wall_ms, flops, "
           "flops_full,"
           " recompute_fraction, has_oracle FROM step WHERE run_id = ? ORDER BY step");
    s.bind(1, run_id);
    while (s.step()) {
        StepMeta m;
        m.step = static_cast<int32_t>(s.col_int(0));
        m.block = static_cast<int32_t>(s.col_int(1));
        m.step_in_block = static_cast<int32_t>(s.col_int(2));
        m.seq_len = static_cast<int32_t>(s.col_int(3));
        m.n_layers = static_cast<int32_t>(s.col_int(4));
        m.n_committed = static_cast<int32_t>(s.col_int(5));
        m.wall_ms = s.col_double(6);
        m.flops = s.col_double(7);
        m.flops_full = s.col_double(8);
        m.recompute_fraction = s.col_double(9);
        m.has_oracle = s.col_int(10) != 0;
        out.push_back(m);
    }
    return out;
}

std::shared_ptr<trace::StepRecord> SessionReader::load_step(int64_t run_id, int32_t step,
                                                            const std::vector<int32_t>& layers) {
    const std::string where =
        m_info.path + ": run " + std::to_string(run_id) + " step " + std::to_string(step);
    auto r = std::make_shared<trace::StepRecord>();
    {
        Stmt s(m_db,
               "SELECT block, step_in_block, seq_len, n_layers, wall_ms, flops, flops_full, "
               "triggers_json,"
               " token_text_json, has_oracle, oracle_logits_kl, oracle_commit_differs FROM step "
               "WHERE run_id = ? AND step = ?");
        s.bind(1, run_id).bind(2, int64_t{step});
        if (!s.step()) throw SessionError(where + ": no such step");
        r->run_id = static_cast<int32_t>(run_id);
        r->step = step;
        r->block = static_cast<int32_t>(s.col_int(0));
        r->step_in_block = static_cast<int32_t>(s.col_int(1));
        r->seq_len = static_cast<int32_t>(s.col_int(2));
        r->n_layers = static_cast<int32_t>(s.col_int(3));
        r->wall_ms = s.col_double(4);
        r->flops = s.col_double(5);
        r->flops_full = s.col_double(6);
        const json triggers = parse_json(s.col_text(7), where);
        for (const auto& t : triggers) {
            trace::TriggerEvent e;
            e.kind = t.value("kind", "");
            e.layer = t.value("layer", -1);
            e.row = t.value("row", -1);
            e.value = t["value"].is_number() ? t["value"].get<double>() : NAN;
            e.threshold = t["threshold"].is_number() ? t["threshold"].get<double>() : NAN;
            e.fired = t.value("fired", false);
            e.action = t.value("action", "");
            r->triggers.push_back(e);
        }
        r->new_token_text = parse_token_text(s.col_text(8), where);
        r->has_oracle = s.col_int(9) != 0;
        r->oracle.logits_kl = s.col_double(10);
        r->oracle.commit_differs = s.col_int(11) != 0;
    }
    if (r->seq_len < 0 || r->n_layers < 0 ||
        static_cast<int64_t>(r->seq_len) * r->n_layers > (1 << 28))
        throw SessionError(where + ": implausible sizes");
    const size_t L = static_cast<size_t>(r->seq_len), NL = L * static_cast<size_t>(r->n_layers);
    Stmt a(m_db,
           "SELECT name, dtype, shape, encoding, data FROM array WHERE run_id = ? AND step = ?");
    a.bind(1, run_id).bind(2, int64_t{step});
    std::vector<uint8_t> states, actions;
    while (a.step()) {
        const auto name = a.col_text(0), dtype = a.col_text(1), shape = a.col_text(2),
                   enc = a.col_text(3);
        const uint8_t* d = a.col_blob(4);
        const size_t n = a.col_bytes(4);
        try {
            if (name == "tokens")
                r->tokens = decode_array<int32_t>(dtype, shape, enc, d, n);
            else if (name == "states")
                states = decode_array<uint8_t>(dtype, shape, enc, d, n);
            else if (name == "predicted")
                r->predicted = decode_array<int32_t>(dtype, shape, enc, d, n);
            else if (name == "confidence")
                r->confidence = decode_array<float>(dtype, shape, enc, d, n);
            else if (name == "committed")
                r->committed = decode_array<int32_t>(dtype, shape, enc, d, n);
            else if (name == "actions")
                actions = decode_array<uint8_t>(dtype, shape, enc, d, n);
            else if (name == "cache_age")
                r->cache_age = decode_array<uint16_t>(dtype, shape, enc, d, n);
            else if (name == "layer_ms")
                r->layer_ms = decode_array<float>(dtype, shape, enc, d, n);
            else if (name == "topk_ids")
                r->topk_ids = decode_array<int32_t>(dtype, shape, enc, d, n);
            else if (name == "topk_probs")
                r->topk_probs = decode_array<float>(dtype, shape, enc, d, n);
            else if (name == "entropy")
                r->entropy = decode_array<float>(dtype, shape, enc, d, n);
            else if (name == "margin")
                r->margin = decode_array<float>(dtype, shape, enc, d, n);
            else if (name == "oracle_k_cos")
                r->oracle.k_cos = decode_array<float>(dtype, shape, enc, d, n);
            else if (name == "oracle_v_cos")
                r->oracle.v_cos = decode_array<float>(dtype, shape, enc, d, n);
            else if (name == "oracle_k_rel_l2")
                r->oracle.k_rel_l2 = decode_array<float>(dtype, shape, enc, d, n);
            else if (name == "oracle_v_rel_l2")
                r->oracle.v_rel_l2 = decode_array<float>(dtype, shape, enc, d, n);
        } catch (const SessionError& e) {
            throw SessionError(where + ": array '" + name + "': " + e.what());
        }
    }
    // Every per-row array must match the step's sizes, whatever the blob claimed.
    auto expect = [&](size_t got, size_t want, const char* what) {
        if (got != want)
            throw SessionError(where + ": array '" + std::string(what) + "' has " +
                               std::to_string(got) + " values, expected " + std::to_string(want));
    };
    expect(r->tokens.size(), L, "tokens");
    expect(states.size(), L, "states");
    expect(r->predicted.size(), L, "predicted");
    expect(r->confidence.size(), L, "confidence");
    expect(actions.size(), NL, "actions");
    expect(r->cache_age.size(), NL, "cache_age");
    r->states.resize(L);
    for (size_t i = 0; i < L; ++i) {
        if (states[i] > 3)
            throw SessionError(where + ": invalid token state " + std::to_string(states[i]));
        r->states[i] = static_cast<trace::TokenState>(states[i]);
    }
    r->actions.resize(NL);
    for (size_t i = 0; i < NL; ++i) {
        if (actions[i] > 4)
            throw SessionError(where + ": invalid row action " + std::to_string(actions[i]));
        r->actions[i] = static_cast<trace::RowAction>(actions[i]);
    }
    for (int32_t c : r->committed)
        if (c < 0 || static_cast<size_t>(c) >= L)
            throw SessionError(where + ": committed position out of range");
    if (!r->topk_ids.empty()) {
        expect(r->topk_ids.size(), L * trace::StepRecord::kTopK, "topk_ids");
        expect(r->topk_probs.size(), L * trace::StepRecord::kTopK, "topk_probs");
        expect(r->entropy.size(), L, "entropy");
        expect(r->margin.size(), L, "margin");
    }
    if (r->has_oracle) {
        expect(r->oracle.k_cos.size(), NL, "oracle_k_cos");
        expect(r->oracle.v_cos.size(), NL, "oracle_v_cos");
    }

    if (layers.size() == 1 && layers[0] == -2) return r;
    std::string sql =
        "SELECT layer, head, rows, cols, row_index, quant, encoding, data, row_scale FROM "
        "attention WHERE run_id = ? AND step = ?";
    if (!layers.empty()) {
        sql += " AND layer IN (";
        for (size_t i = 0; i < layers.size(); ++i)
            sql += (i ? "," : "") + std::to_string(layers[i]);
        sql += ")";
    }
    Stmt at(m_db, sql + " ORDER BY layer, head");
    at.bind(1, run_id).bind(2, int64_t{step});
    while (at.step()) {
        trace::AttentionMap m;
        m.layer = static_cast<int32_t>(at.col_int(0));
        m.head = static_cast<int32_t>(at.col_int(1));
        m.rows = static_cast<int32_t>(at.col_int(2));
        m.cols = static_cast<int32_t>(at.col_int(3));
        const std::string aw = where + ": attention layer " + std::to_string(m.layer);
        if (m.rows < 0 || m.cols < 0 || m.cols > r->seq_len || m.rows > r->seq_len)
            throw SessionError(aw + ": bad size");
        const std::string quant = at.col_text(5);
        const bool four_bit = quant == "rowmax-u4";
        if (!four_bit && quant != "rowmax-u8")
            throw SessionError(aw + ": unknown quantisation '" + quant + "'");
        try {
            m.row_index = decode_array<int32_t>("i32", std::to_string(m.rows), "raw",
                                                at.col_blob(4), at.col_bytes(4));
            const auto scale = decode_array<float>("f32", std::to_string(m.rows), "raw",
                                                   at.col_blob(8), at.col_bytes(8));
            const size_t cols = static_cast<size_t>(m.cols);
            const size_t row_bytes = four_bit ? (cols + 1) / 2 : cols;
            auto q = decode_array<uint8_t>("u8",
                                           std::to_string(m.rows) + "," + std::to_string(row_bytes),
                                           at.col_text(6), at.col_blob(7), at.col_bytes(7));
            // Into the record's 8-bit levels of the row maximum: u8 as stored, u4 * 17 (= 255/15).
            m.row_scale = scale;
            for (float& v : m.row_scale)  // a corrupt scale reads as an empty row, never NaN
                if (!(v >= 0.f && v <= 1.f)) v = 0.f;
            m.levels.resize(static_cast<size_t>(m.rows) * cols);
            for (size_t row = 0; row < static_cast<size_t>(m.rows); ++row) {
                const uint8_t* in = q.data() + row * row_bytes;
                uint8_t* out = m.levels.data() + row * cols;
                if (four_bit)
                    for (size_t c = 0; c < cols; ++c)
                        out[c] = static_cast<uint8_t>(((in[c / 2] >> ((c & 1) * 4)) & 15) * 17);
                else
                    std::copy(in, in + cols, out);
            }
        } catch (const SessionError& e) {
            throw SessionError(aw + ": " + e.what());
        }
        for (int32_t ri : m.row_index)
            if (ri < 0 || ri >= r->seq_len) throw SessionError(aw + ": row index out of range");
        r->attention.push_back(std::move(m));
    }
    return r;
}

void SessionReader::load_into(trace::TraceStore& store, const std::vector<int64_t>& run_ids,
                              bool with_attention) {
    for (const auto& run : runs()) {
        if (!run_ids.empty() &&
            std::find(run_ids.begin(), run_ids.end(), run.run_id) == run_ids.end())
            continue;
        store.on_run_start(run.info);
        for (int32_t s = 0; s < run.step_count; ++s)
            store.publish(load_step(
                run.run_id, s, with_attention ? std::vector<int32_t>{} : std::vector<int32_t>{-2}));
        trace::RunSummary sum = run.summary.value_or(trace::RunSummary{});
        sum.status = run.status;
        sum.steps = static_cast<int32_t>(run.step_count);
        store.on_run_end(run.info.run_id, sum);
    }
}

std::vector<std::string> SessionReader::check() {
    std::vector<std::string> problems;
    {
        Stmt s(m_db, "PRAGMA integrity_check");
        while (s.step())
            if (s.col_text(0) != "ok") problems.push_back("integrity: " + s.col_text(0));
    }
    try {
        for (const auto& run : runs()) {
            for (int32_t st = 0; st < run.step_count; ++st) {
                try {
                    load_step(run.run_id, st);
                } catch (const SessionError& e) {
                    problems.push_back(e.what());
                }
            }
        }
    } catch (const SessionError& e) {
        problems.push_back(e.what());
    }
    return problems;
}

void SessionReader::delete_run(int64_t run_id) {
    if (!m_writable) throw SessionError(m_info.path + ": read-only, cannot delete");
    m_db.exec("BEGIN IMMEDIATE");
    for (const char* table : {"attention", "array", "step", "run"}) {
        Stmt s(m_db, std::string("DELETE FROM ") + table + " WHERE run_id = ?");
        s.bind(1, run_id).run();
    }
    m_db.exec("COMMIT");
}

void SessionReader::rename(const std::string& name) {
    if (!m_writable) throw SessionError(m_info.path + ": read-only, cannot rename");
    Stmt s(m_db, "INSERT OR REPLACE INTO meta(key, value) VALUES ('name', ?)");
    s.bind(1, name).run();
    m_info.name = name;
}

void SessionReader::set_note(int64_t run_id, const std::string& note) {
    if (!m_writable) throw SessionError(m_info.path + ": read-only, cannot annotate");
    Stmt s(m_db, "UPDATE run SET note = ? WHERE run_id = ?");
    s.bind(1, note).bind(2, run_id).run();
}

void SessionReader::copy_to(const std::string& destination) {
    if (std::filesystem::exists(destination)) std::filesystem::remove(destination);
    Stmt s(m_db, "VACUUM INTO ?");
    s.bind(1, destination).run();
}

void SessionReader::vacuum() {
    if (!m_writable) throw SessionError(m_info.path + ": read-only, cannot vacuum");
    m_db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    m_db.exec("VACUUM");
}

}  // namespace cl::sessions
