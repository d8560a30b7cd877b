#include "sessions/session_reader.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "sessions/blob_codec.h"
#include "sessions/record_sql.h"
#include "sessions/reports.h"
#include "sessions/schema.h"

namespace cl::sessions {

namespace {

trace::RunStatus parse_status(const std::string& s) {
    trace::RunStatus status = trace::RunStatus::Running;
    if (s == "complete") status = trace::RunStatus::Complete;
    if (s == "aborted") status = trace::RunStatus::Aborted;
    return status;
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
    if (!m_writable && m_info.schema_version_found != kCurrentSchema) {
        // An older file we may not change (a bundled lesson, a read-only share): migrate a copy.
        m_db = m_db.copy_into_memory();
        check_and_migrate(m_db, true);
    }
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
    const auto& fields = run_fields();
    const int n = column_count(fields);
    Stmt s(m_db, "SELECT run_id, comparison_id, " + column_list(fields) +
                     ", status, started_utc, ended_utc, summary_json, note,"
                     " (SELECT count(*) FROM step WHERE step.run_id = run.run_id)"
                     " FROM run ORDER BY run_id");
    while (s.step()) {
        RunRecord r;
        r.run_id = s.col_int(0);
        r.comparison_id = s.col_int(1);
        const std::string where = m_info.path + ": run " + std::to_string(r.run_id);
        read_fields(s, 2, fields, r.info, where);
        r.info.run_id = static_cast<int32_t>(r.run_id);
        r.status = parse_status(s.col_text(2 + n));
        r.started_utc = s.col_text(3 + n);
        r.ended_utc = s.col_text(4 + n);
        if (!s.col_null(5 + n)) r.summary = read_summary(s, 5 + n, where);
        if (r.summary) r.summary->status = r.status;
        r.note = s.col_text(6 + n);
        r.step_count = s.col_int(7 + n);
        r.info.initial_tokens = read_initial_tokens(r.run_id, where);
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<ComparisonRecord> SessionReader::comparisons() {
    std::vector<ComparisonRecord> out;
    Stmt s(m_db,
           "SELECT c.comparison_id, c.created_utc, m.run_id FROM comparison c JOIN comparison_run "
           "m ON m.comparison_id = c.comparison_id ORDER BY c.comparison_id, m.column_index");
    while (s.step()) {
        if (out.empty() || out.back().comparison_id != s.col_int(0))
            out.push_back({s.col_int(0), s.col_text(1), {}});
        out.back().run_ids.push_back(s.col_int(2));
    }
    return out;
}

std::map<int64_t, int64_t> SessionReader::run_bytes() {
    std::map<int64_t, int64_t> bytes;
    // length() of a blob reads its size from the row header, not the blob itself.
    for (const char* table : {"array", "attention"}) {
        Stmt s(m_db,
               std::string("SELECT run_id, sum(length(data)) FROM ") + table + " GROUP BY run_id");
        while (s.step()) bytes[s.col_int(0)] += s.col_int(1);
    }
    return bytes;
}

trace::RunSummary SessionReader::read_summary(const Stmt& s, int column, const std::string& where) {
    trace::RunSummary summary;
    try {
        const json j = column_value(s, column, Column::Json);
        if (!j.is_null()) from_json(j, summary);
    } catch (const SessionError& e) {
        throw SessionError(where + ": summary: " + e.what());
    }
    return summary;
}

std::vector<int32_t> SessionReader::read_initial_tokens(int64_t run_id, const std::string& where) {
    Stmt a(m_db,
           "SELECT dtype, shape, encoding, data FROM array WHERE run_id = ? AND step = -1 AND "
           "name = ?");
    a.bind(1, run_id).bind(2, std::string(kInitialTokensArray));
    if (!a.step()) return {};
    try {
        return decode_array<int32_t>(a.col_text(0), a.col_text(1), a.col_text(2), a.col_blob(3),
                                     a.col_bytes(3));
    } catch (const SessionError& e) {
        throw SessionError(where + ": initial tokens: " + e.what());
    }
}

std::vector<json> SessionReader::step_scalars(int64_t run_id) {
    std::vector<json> out;
    Stmt s(m_db,
           "SELECT " + column_list(step_fields()) + " FROM step WHERE run_id = ? ORDER BY step");
    s.bind(1, run_id);
    while (s.step()) out.push_back(read_fields_json(s, 0, step_fields()));
    return out;
}

std::shared_ptr<trace::StepRecord> SessionReader::load_step(int64_t run_id, int32_t step,
                                                            const std::vector<int32_t>& layers) {
    const std::string where =
        m_info.path + ": run " + std::to_string(run_id) + " step " + std::to_string(step);
    auto r = std::make_shared<trace::StepRecord>();
    {
        Stmt s(m_db,
               "SELECT " + column_list(step_fields()) + " FROM step WHERE run_id = ? AND step = ?");
        s.bind(1, run_id).bind(2, int64_t{step});
        if (!s.step()) throw SessionError(where + ": no such step");
        read_fields(s, 0, step_fields(), *r, where);
        r->run_id = static_cast<int32_t>(run_id);
    }
    if (r->seq_len < 0 || r->n_layers < 0 ||
        static_cast<int64_t>(r->seq_len) * r->n_layers > (1 << 28))
        throw SessionError(where + ": implausible sizes");
    read_arrays(run_id, *r, where);
    check_arrays(*r, where);
    if (layers.size() == 1 && layers[0] == -2) return r;
    read_attention(run_id, layers, *r, where);
    return r;
}

void SessionReader::read_arrays(int64_t run_id, trace::StepRecord& r, const std::string& where) {
    Stmt a(m_db,
           "SELECT name, dtype, shape, encoding, data FROM array WHERE run_id = ? AND step = ?");
    a.bind(1, run_id).bind(2, int64_t{r.step});
    while (a.step()) {
        const auto name = a.col_text(0);
        const ArrayField* field = find_array(name);
        if (!field) throw SessionError(where + ": unknown array '" + name + "'");
        try {
            field->decode(r, a.col_text(1), a.col_text(2), a.col_text(3), a.col_blob(4),
                          a.col_bytes(4));
        } catch (const SessionError& e) {
            throw SessionError(where + ": array '" + name + "': " + e.what());
        }
    }
}

namespace {

// Into the record's 8-bit levels of the row maximum: u8 as stored, u4 * 17 (= 255/15).
std::vector<uint8_t> unpack_attention_levels(const std::vector<uint8_t>& q, size_t rows,
                                             size_t cols, bool four_bit) {
    const size_t row_bytes = four_bit ? (cols + 1) / 2 : cols;
    std::vector<uint8_t> levels(rows * cols);
    for (size_t row = 0; row < rows; ++row) {
        const uint8_t* in = q.data() + row * row_bytes;
        uint8_t* out = levels.data() + row * cols;
        if (four_bit)
            for (size_t c = 0; c < cols; ++c)
                out[c] = static_cast<uint8_t>(((in[c / 2] >> ((c & 1) * 4)) & 15) * 17);
        else
            std::copy(in, in + cols, out);
    }
    return levels;
}

// One row of the attention table (columns as selected by read_attention) into a map.
trace::AttentionMap read_attention_map(const Stmt& at, int32_t seq_len, const std::string& where) {
    trace::AttentionMap m;
    m.layer = static_cast<int32_t>(at.col_int(0));
    m.head = static_cast<int32_t>(at.col_int(1));
    m.rows = static_cast<int32_t>(at.col_int(2));
    m.cols = static_cast<int32_t>(at.col_int(3));
    m.keys = static_cast<int32_t>(at.col_int(9));
    m.key_tile = static_cast<int32_t>(at.col_int(10));
    m.row_tile = static_cast<int32_t>(at.col_int(11));
    if (m.keys == 0) m.keys = m.cols;  // v7 and older: full resolution
    const std::string aw = where + ": attention layer " + std::to_string(m.layer);
    if (m.rows < 0 || m.cols < 0 || m.cols > seq_len || m.rows > seq_len)
        throw SessionError(aw + ": bad size");
    if (m.key_tile < 1 || m.row_tile < 1 || m.key_tile > seq_len || m.row_tile > seq_len ||
        m.keys < 0 || m.keys > seq_len || m.cols != (int64_t{m.keys} + m.key_tile - 1) / m.key_tile)
        throw SessionError(aw + ": tiles " + std::to_string(m.row_tile) + "x" +
                           std::to_string(m.key_tile) + " do not give its " +
                           std::to_string(m.cols) + " columns of " + std::to_string(m.keys) +
                           " keys");
    const std::string quant = at.col_text(5);
    const bool four_bit = quant == "rowmax-u4";
    if (!four_bit && quant != "rowmax-u8")
        throw SessionError(aw + ": unknown quantisation '" + quant + "'");
    try {
        m.row_index = decode_array<int32_t>("i32", std::to_string(m.rows), "raw", at.col_blob(4),
                                            at.col_bytes(4));
        m.row_scale = decode_array<float>("f32", std::to_string(m.rows), "raw", at.col_blob(8),
                                          at.col_bytes(8));
        const size_t cols = static_cast<size_t>(m.cols);
        const size_t row_bytes = four_bit ? (cols + 1) / 2 : cols;
        const auto q =
            decode_array<uint8_t>("u8", std::to_string(m.rows) + "," + std::to_string(row_bytes),
                                  at.col_text(6), at.col_blob(7), at.col_bytes(7));
        m.levels = unpack_attention_levels(q, static_cast<size_t>(m.rows), cols, four_bit);
    } catch (const SessionError& e) {
        throw SessionError(aw + ": " + e.what());
    }
    for (float& v : m.row_scale)  // a corrupt scale reads as an empty row, never NaN
        if (!(v >= 0.f && v <= 1.f)) v = 0.f;
    for (int32_t ri : m.row_index)
        if (ri < 0 || ri >= seq_len) throw SessionError(aw + ": row index out of range");
    return m;
}

}  // namespace

void SessionReader::read_attention(int64_t run_id, const std::vector<int32_t>& layers,
                                   trace::StepRecord& r, const std::string& where) {
    std::string sql =
        "SELECT layer, head, rows, cols, row_index, quant, encoding, data, row_scale, keys, "
        "key_tile, row_tile FROM attention WHERE run_id = ? AND step = ?";
    if (!layers.empty()) {
        sql += " AND layer IN (";
        for (size_t i = 0; i < layers.size(); ++i) {
            if (i) sql += ',';
            sql += std::to_string(layers[i]);
        }
        sql += ")";
    }
    Stmt at(m_db, sql + " ORDER BY layer, head");
    at.bind(1, run_id).bind(2, int64_t{r.step});
    while (at.step()) r.attention.push_back(read_attention_map(at, r.seq_len, where));
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

std::vector<trace::AccuracySweep> SessionReader::accuracy_sweeps() {
    return read_accuracy_sweeps(m_db);
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
                    problems.emplace_back(e.what());
                }
            }
        }
    } catch (const SessionError& e) {
        problems.emplace_back(e.what());
    }
    try {
        accuracy_sweeps();
    } catch (const SessionError& e) {
        problems.emplace_back(e.what());
    }
    return problems;
}

void SessionReader::delete_run(int64_t run_id) {
    if (!m_writable) throw SessionError(m_info.path + ": read-only, cannot delete");
    m_db.exec("BEGIN IMMEDIATE");
    delete_run_rows(m_db, run_id);
    m_db.exec("COMMIT");
}

void SessionReader::delete_comparison(int64_t comparison_id) {
    if (!m_writable) throw SessionError(m_info.path + ": read-only, cannot delete");
    m_db.exec("BEGIN IMMEDIATE");
    try {
        delete_comparison_rows(m_db, comparison_id, {});
        m_db.exec("COMMIT");
    } catch (...) {
        sqlite3_exec(m_db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
    }
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
