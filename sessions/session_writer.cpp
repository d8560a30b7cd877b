#include "sessions/session_writer.h"

#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <chrono>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "sessions/blob_codec.h"
#include "sessions/record_sql.h"
#include "sessions/reports.h"
#include "sessions/schema.h"

namespace cl::sessions {

using json = nlohmann::json;

namespace {

// Quantised values below this (about 2% of the row maximum) are stored as 0: invisible on a
// heatmap, and the resulting runs of zeros roughly halve the size of a session.
constexpr uint8_t kAttentionFloorU8 = 6;  // 8-bit values below 6/255 of the row max -> 0

// Niceness of the writer thread (0 = normal, 19 = lowest).
constexpr int kWriterNice = 10;

// rowmax-uN: each query row is scaled by its own maximum (the record already holds 8-bit levels
// of it, trace::AttentionMap). Rows keep their shape at any sequence length, and the many
// near-zero probabilities become exact zeros, which zstd compresses to almost nothing (sessions
// stay small). 4-bit rows are packed two columns per byte (low nibble first), each row starting
// on a byte: half the bytes for zstd to chew on, which also halves the writer's CPU time.
EncodedArray pack_attention_levels(const trace::AttentionMap& m, bool four_bit) {
    const size_t cols = static_cast<size_t>(m.cols);
    const size_t row_bytes = four_bit ? (cols + 1) / 2 : cols;
    if (m.levels.size() != static_cast<size_t>(m.rows) * cols ||
        m.row_scale.size() != static_cast<size_t>(m.rows))
        throw SessionError("attention map of layer " + std::to_string(m.layer) +
                           " has inconsistent sizes");
    std::vector<uint8_t> q(static_cast<size_t>(m.rows) * row_bytes);
    for (size_t row = 0; row < static_cast<size_t>(m.rows); ++row) {
        const uint8_t* in = m.levels.data() + row * cols;
        uint8_t* out = q.data() + row * row_bytes;
        if (four_bit) {
            // 255 = 15 * 17: level8 -> round(level8 / 17).
            auto nibble = [](uint8_t v) { return static_cast<uint8_t>((v + 8) / 17); };
            size_t c = 0;
            for (; c + 1 < cols; c += 2)
                out[c / 2] = static_cast<uint8_t>(nibble(in[c]) | (nibble(in[c + 1]) << 4));
            if (c < cols) out[c / 2] = nibble(in[c]);
        } else {
            for (size_t c = 0; c < cols; ++c) out[c] = in[c] < kAttentionFloorU8 ? 0 : in[c];
        }
    }
    // zstd level 1: on these quantised rows levels 3 and 7 save under 2% (measured on a G=256
    // run: 29.7 / 29.8 / 29.4 MB at levels 1 / 3 / 7) for several times the CPU time.
    return encode_array(q, {m.rows, static_cast<int64_t>(row_bytes)}, true, 1);
}

}  // namespace

std::unique_ptr<SessionWriter> SessionWriter::open(const std::string& path, WriterOptions options) {
    if (options.attention_bits != 4 && options.attention_bits != 8)
        throw SessionError(path + ": attention precision must be 4 or 8 bits, not " +
                           std::to_string(options.attention_bits));
    return std::unique_ptr<SessionWriter>(new SessionWriter(path, std::move(options)));
}

SessionWriter::SessionWriter(std::string path, WriterOptions options)
    : m_path(std::move(path)), m_options(std::move(options)) {
    m_db = Db(m_path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    const bool fresh = m_db.pragma_int("application_id") == 0 &&
                       m_db.pragma_int("user_version") == 0 && m_db.pragma_int("page_count") == 0;
    if (fresh) {
        m_db.exec("PRAGMA journal_mode = WAL");
        create_schema(m_db,
                      m_options.schema_version > 0 ? m_options.schema_version : kCurrentSchema);
        if (!m_options.name.empty() &&
            (m_options.schema_version == 0 || m_options.schema_version >= 2)) {
            Stmt s(m_db, "INSERT OR REPLACE INTO meta(key, value) VALUES ('name', ?)");
            s.bind(1, m_options.name).run();
        }
    } else {
        check_and_migrate(m_db, true);  // appending to an older session migrates it first
        m_db.exec("PRAGMA journal_mode = WAL");
    }
    m_db.exec(
        "PRAGMA synchronous = NORMAL");  // WAL + NORMAL: durable at checkpoints, never corrupt
    m_run_fields = fields_in_table(m_db, "run", run_fields());
    m_step_fields = fields_in_table(m_db, "step", step_fields());
    m_has_comparison_tables = table_exists(m_db, "comparison_run");
    {
        Stmt c(m_db, "SELECT count(*) FROM pragma_table_info('attention') WHERE name = 'key_tile'");
        m_has_attention_tiles = c.step() && c.col_int(0) > 0;
    }
    const std::string next_id =
        m_has_comparison_tables ? "SELECT max(coalesce((SELECT max(comparison_id) FROM run), -1), "
                                  "coalesce((SELECT max(comparison_id) FROM comparison), -1)) + 1"
                                : "SELECT coalesce(max(comparison_id), -1) + 1 FROM run";
    Stmt s(m_db, next_id);
    if (s.step()) m_comparison = static_cast<int32_t>(s.col_int(0));
    m_thread = std::thread([this] { thread_main(); });
}

SessionWriter::~SessionWriter() {
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_cv.notify_all();
    if (m_thread.joinable()) m_thread.join();
    // A closed session is a plain file (no -wal/-shm beside it), so opening it read-only (a
    // bundled lesson, a session a user received) writes nothing next to it. While another
    // connection has it open this fails and changes nothing; it stays a valid WAL file.
    if (m_db.get())
        sqlite3_exec(m_db.get(), "PRAGMA journal_mode = DELETE", nullptr, nullptr, nullptr);
}

bool SessionWriter::wants(const trace::ProbeRequest& r) const {
    switch (r.kind) {
        case trace::ProbeKind::StepRecord:
            return true;
        case trace::ProbeKind::Attention:
            return r.head == -1 ? m_options.attention_means
                                : m_options.per_head_layers.count(r.layer) > 0;
        case trace::ProbeKind::Oracle:
            return m_options.want_oracle;
        case trace::ProbeKind::Drift:
            return m_options.want_drift;
        case trace::ProbeKind::FullResolution:
            return m_options.full_resolution_layers.count(r.layer) > 0;
    }
    return false;
}

void SessionWriter::enqueue(Item item) {
    {
        std::unique_lock lock(m_mutex);
        if (m_queue.size() >= m_options.max_queued && m_error.empty()) {
            // Bounded memory: wait (rarely: only when the writer has fallen far behind) until
            // the writer has taken at least half of what is queued.
            const uint64_t target = m_enqueued - m_options.max_queued / 2;
            m_cv.notify_one();
            m_done_cv.wait(lock, [&] { return m_processed >= target || m_stop; });
        }
        m_queue.push_back(std::move(item));
        ++m_enqueued;
    }
    m_cv.notify_one();
}

void SessionWriter::on_run_start(const trace::RunInfo& info) {
    enqueue(RunStart{info});
}

void SessionWriter::publish(std::shared_ptr<const trace::StepRecord> record) {
    enqueue(std::move(record));
}

void SessionWriter::on_run_end(int32_t run_id, const trace::RunSummary& summary) {
    enqueue(RunEnd{run_id, summary});
}

void SessionWriter::add_report(const trace::AccuracySweep& sweep) {
    enqueue(Report{kAccuracySweepKind, to_json(sweep).dump()});
}

void SessionWriter::begin_comparison(const std::vector<int32_t>& runs_by_column, bool lap,
                                     bool keep_every_lap) {
    enqueue(NewComparison{runs_by_column, lap, keep_every_lap});
}

bool SessionWriter::flush() {
    std::unique_lock lock(m_mutex);
    const uint64_t target = m_enqueued;
    m_cv.notify_one();
    m_done_cv.wait(lock, [&] { return m_processed >= target; });
    return m_error.empty();
}

double SessionWriter::cpu_ms() const {
    std::lock_guard lock(m_mutex);
    return m_cpu_ms;
}

std::string SessionWriter::error() const {
    std::lock_guard lock(m_mutex);
    return m_error;
}

size_t SessionWriter::unwritten_steps() const {
    std::lock_guard lock(m_mutex);
    size_t n = 0;
    for (const auto& i : m_unwritten)
        n += std::holds_alternative<std::shared_ptr<const trace::StepRecord>>(i);
    return n;
}

void SessionWriter::thread_main() {
    // The recorder must never slow the engine down: on a busy machine (the engine's thread, the
    // UI, a training job) this thread yields its core and catches up when the engine waits.
    // Linux applies setpriority to the calling thread alone when given its thread id.
#ifdef __linux__
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kWriterNice);
#endif
    for (;;) {
        std::deque<Item> batch;
        {
            std::unique_lock lock(m_mutex);
            m_cv.wait_for(lock, std::chrono::milliseconds(m_options.batch_ms), [&] {
                return m_stop || static_cast<int>(m_queue.size()) >= m_options.batch_steps;
            });
            if (m_queue.empty() && m_stop) return;
            batch.swap(m_queue);
        }
        if (!batch.empty()) write_batch(batch);
        timespec cpu{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
        {
            std::lock_guard lock(m_mutex);
            m_processed += batch.size();
            m_cpu_ms =
                static_cast<double>(cpu.tv_sec) * 1e3 + static_cast<double>(cpu.tv_nsec) / 1e6;
        }
        m_done_cv.notify_all();
    }
}

void SessionWriter::write_batch(std::deque<Item>& batch) {
    {
        std::lock_guard lock(m_mutex);
        if (!m_error.empty()) {  // after a failure keep everything in memory, write nothing more
            for (auto& i : batch) m_unwritten.push_back(std::move(i));
            return;
        }
    }
    try {
        m_db.exec("BEGIN IMMEDIATE");
        for (const auto& item : batch) write_item(item);
        m_db.exec("COMMIT");
    } catch (const std::exception& e) {
        m_insert_step.reset();  // a failed statement is prepared afresh
        m_insert_array.reset();
        sqlite3_exec(m_db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
        std::lock_guard lock(m_mutex);
        m_error =
            std::string(e.what()) + " (the run is kept in memory; committed steps are intact)";
        for (auto& i : batch) m_unwritten.push_back(std::move(i));
    }
}

void SessionWriter::write_item(const Item& item) {
    if (const auto* start = std::get_if<RunStart>(&item))
        write_run_start(start->info);
    else if (const auto* end = std::get_if<RunEnd>(&item))
        write_run_end(end->run_id, end->summary);
    else if (const auto* report = std::get_if<Report>(&item))
        insert_report(m_db, report->kind, report->body);
    else if (const auto* comparison = std::get_if<NewComparison>(&item))
        write_new_comparison(*comparison);
    else
        write_step(*std::get<std::shared_ptr<const trace::StepRecord>>(item));
}

void SessionWriter::write_run_start(const trace::RunInfo& info) {
    const auto& fields = m_run_fields;
    const std::string columns = column_list(fields);
    std::string values;
    for (int i = 0; i < column_count(fields); ++i) values += ",?";
    Stmt s(m_db, "INSERT INTO run(comparison_id, " + columns + ", status, started_utc) VALUES (?" +
                     values + ",'running',strftime('%Y-%m-%dT%H:%M:%SZ','now'))");
    s.bind(1, int64_t{m_comparison});
    bind_fields(s, 2, fields, info);
    s.run();
    const int64_t id = sqlite3_last_insert_rowid(m_db.get());
    m_db_run[info.run_id] = id;
    const auto planned = m_planned_column.find(info.run_id);
    if (planned != m_planned_column.end()) {
        add_to_comparison(id, planned->second);
        m_planned_column.erase(planned);
    } else {
        add_to_comparison(id, m_next_column++);
    }
    const auto a =
        encode_array(info.initial_tokens, {static_cast<int64_t>(info.initial_tokens.size())}, true);
    insert_array(id, -1, std::string(kInitialTokensArray), a);
}

void SessionWriter::ensure_comparison_row() {
    if (m_comparison_written || !m_has_comparison_tables) return;
    Stmt s(m_db,
           "INSERT INTO comparison(comparison_id, created_utc) VALUES "
           "(?, strftime('%Y-%m-%dT%H:%M:%SZ','now'))");
    s.bind(1, int64_t{m_comparison}).run();
    m_comparison_written = true;
}

void SessionWriter::add_to_comparison(int64_t db_run, int32_t column) {
    if (!m_has_comparison_tables) return;
    ensure_comparison_row();
    Stmt s(m_db,
           "INSERT OR REPLACE INTO comparison_run(comparison_id, run_id, column_index) VALUES "
           "(?,?,?)");
    s.bind(1, int64_t{m_comparison}).bind(2, db_run).bind(3, int64_t{column}).run();
}

void SessionWriter::write_new_comparison(const NewComparison& c) {
    if (!m_has_comparison_tables) return;  // an older file keeps one comparison per recorder
    std::set<int64_t> carried;
    for (int32_t engine_id : c.runs_by_column) {
        const auto it = m_db_run.find(engine_id);
        if (it != m_db_run.end()) carried.insert(it->second);
    }
    if (m_comparison_written) {
        // A comparison replaced before any of its runs made a step (a setup applied twice, two
        // quick slider moves) is dropped: it shows nothing.
        const bool empty = m_steps_in_comparison == 0;
        if (empty || (c.lap && m_comparison_is_lap && !c.keep_every_lap))
            delete_comparison_rows(m_db, m_comparison, carried);
        ++m_comparison;
        m_comparison_written = false;
    }
    m_comparison_is_lap = c.lap;
    m_steps_in_comparison = 0;
    m_planned_column.clear();
    m_next_column = static_cast<int32_t>(c.runs_by_column.size());
    for (size_t column = 0; column < c.runs_by_column.size(); ++column) {
        const int32_t engine_id = c.runs_by_column[column];
        const auto it = m_db_run.find(engine_id);
        if (it != m_db_run.end())
            add_to_comparison(it->second, static_cast<int32_t>(column));
        else
            m_planned_column[engine_id] = static_cast<int32_t>(column);
    }
}

void SessionWriter::write_run_end(int32_t run_id, const trace::RunSummary& summary) {
    Stmt u(m_db,
           "UPDATE run SET status = ?, ended_utc = strftime('%Y-%m-%dT%H:%M:%SZ','now'), "
           "summary_json = ? WHERE run_id = ?");
    u.bind(1, std::string(trace::to_string(summary.status)))
        .bind(2, to_json(summary).dump())
        .bind(3, m_db_run.at(run_id))
        .run();
}

void SessionWriter::insert_array(int64_t run, int32_t step, const std::string& name,
                                 const EncodedArray& e) {
    if (!m_insert_array)
        m_insert_array = std::make_unique<Stmt>(
            m_db,
            "INSERT INTO array(run_id, step, name, dtype, shape, encoding, data) VALUES "
            "(?,?,?,?,?,?,?)");
    auto& a = *m_insert_array;
    a.bind(1, run).bind(2, int64_t{step}).bind(3, name).bind(4, e.dtype).bind(5, e.shape);
    a.bind(6, e.encoding).bind_blob(7, e.data).run();
}

void SessionWriter::write_step(const trace::StepRecord& r) {
    const int64_t run = m_db_run.at(r.run_id);
    ++m_steps_in_comparison;
    const auto& fields = m_step_fields;
    if (!m_insert_step) {
        std::string values;
        for (int i = 0; i < column_count(fields); ++i) values += ",?";
        m_insert_step = std::make_unique<Stmt>(
            m_db, "INSERT INTO step(run_id, " + column_list(fields) + ") VALUES (?" + values + ")");
    }
    m_insert_step->bind(1, run);
    bind_fields(*m_insert_step, 2, fields, r);
    m_insert_step->run();
    for (const auto& a : step_arrays())
        if (array_expected(a, r)) insert_array(run, r.step, std::string(a.name), a.encode(r));
    write_attention(run, r);
}

void SessionWriter::write_attention(int64_t run, const trace::StepRecord& r) {
    if (r.attention.empty()) return;
    const bool four_bit = m_options.attention_bits == 4;
    Stmt at(m_db, m_has_attention_tiles
                      ? "INSERT INTO attention(run_id, step, layer, head, rows, cols, row_index, "
                        "row_scale, quant, encoding, data, keys, key_tile, row_tile)"
                        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
                      : "INSERT INTO attention(run_id, step, layer, head, rows, cols, row_index, "
                        "row_scale, quant, encoding, data) VALUES (?,?,?,?,?,?,?,?,?,?,?)");
    for (const auto& m : r.attention) {
        const auto data = pack_attention_levels(m, four_bit);
        const auto rows = encode_array(m.row_index, {m.rows}, false);
        const auto scales = encode_array(m.row_scale, {m.rows}, false);
        at.bind(1, run).bind(2, int64_t{r.step}).bind(3, int64_t{m.layer}).bind(4, int64_t{m.head});
        at.bind(5, int64_t{m.rows}).bind(6, int64_t{m.cols});
        at.bind_blob(7, rows.data).bind_blob(8, scales.data);
        at.bind(9, std::string(four_bit ? "rowmax-u4" : "rowmax-u8")).bind(10, data.encoding);
        at.bind_blob(11, data.data);
        if (m_has_attention_tiles)
            at.bind(12, int64_t{m.key_count()})
                .bind(13, int64_t{m.key_tile})
                .bind(14, int64_t{m.row_tile});
        else if (!m.full_resolution())
            throw SessionError("a pooled attention map cannot be written to a v" +
                               std::to_string(m_options.schema_version) + " session");
        at.run();
    }
}

}  // namespace cl::sessions
