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
#include "sessions/schema.h"
#include "sessions/trace_json.h"

namespace cl::sessions {

using json = nlohmann::json;

namespace {

// Quantised values below this (about 2% of the row maximum) are stored as 0: invisible on a
// heatmap, and the resulting runs of zeros roughly halve the size of a session.
constexpr uint8_t kAttentionFloorU8 = 6;  // 8-bit values below 6/255 of the row max -> 0

// Niceness of the writer thread (0 = normal, 19 = lowest).
constexpr int kWriterNice = 10;

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
    Stmt s(m_db, "SELECT coalesce(max(comparison_id), -1) + 1 FROM run");
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
    }
    return false;
}

void SessionWriter::on_run_start(const trace::RunInfo& info) {
    {
        std::lock_guard lock(m_mutex);
        m_queue.emplace_back(RunStart{info});
        ++m_enqueued;
    }
    m_cv.notify_one();
}

void SessionWriter::publish(std::shared_ptr<const trace::StepRecord> record) {
    {
        std::lock_guard lock(m_mutex);
        m_queue.emplace_back(std::move(record));
        ++m_enqueued;
    }
    m_cv.notify_one();
}

void SessionWriter::on_run_end(int32_t run_id, const trace::RunSummary& summary) {
    {
        std::lock_guard lock(m_mutex);
        m_queue.emplace_back(RunEnd{run_id, summary});
        ++m_enqueued;
    }
    m_cv.notify_one();
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
        sqlite3_exec(m_db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
        std::lock_guard lock(m_mutex);
        m_error =
            std::string(e.what()) + " (the run is kept in memory; committed steps are intact)";
        for (auto& i : batch) m_unwritten.push_back(std::move(i));
    }
}

void SessionWriter::write_item(const Item& item) {
    if (const auto* start = std::get_if<RunStart>(&item)) {
        const auto& i = start->info;
        Stmt s(m_db,
               "INSERT INTO run(comparison_id, policy, params_json, sampler_json, model_name, "
               "model_hash, device, threads,"
               " seed, prompt, prompt_len, gen_len, block_len, steps_planned, n_layers, n_heads, "
               "mask_id, eos_id,"
               " app_version, token_text_json, status, started_utc)"
               " VALUES "
               "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,'running',strftime('%Y-%m-%dT%H:%M:%SZ','"
               "now'))");
        s.bind(1, int64_t{m_comparison})
            .bind(2, i.policy)
            .bind(3, json(i.policy_params).dump())
            .bind(4, json(i.sampler).dump());
        s.bind(5, i.model_name).bind(6, i.model_hash).bind(7, i.device).bind(8, int64_t{i.threads});
        s.bind(9, static_cast<int64_t>(i.seed))
            .bind(10, i.prompt_text)
            .bind(11, int64_t{i.prompt_len});
        s.bind(12, int64_t{i.gen_len}).bind(13, int64_t{i.block_len}).bind(14, int64_t{i.steps});
        s.bind(15, int64_t{i.n_layers}).bind(16, int64_t{i.n_heads}).bind(17, int64_t{i.mask_id});
        s.bind(18, int64_t{i.eos_id})
            .bind(19, i.app_version)
            .bind(20, token_text_to_json(i.token_text).dump());
        s.run();
        const int64_t id = sqlite3_last_insert_rowid(m_db.get());
        m_db_run[i.run_id] = id;
        auto a =
            encode_array(i.initial_tokens, {static_cast<int64_t>(i.initial_tokens.size())}, true);
        Stmt t(m_db,
               "INSERT INTO array(run_id, step, name, dtype, shape, encoding, data) VALUES "
               "(?,-1,'initial_tokens',?,?,?,?)");
        t.bind(1, id)
            .bind(2, a.dtype)
            .bind(3, a.shape)
            .bind(4, a.encoding)
            .bind_blob(5, a.data)
            .run();
        return;
    }
    if (const auto* end = std::get_if<RunEnd>(&item)) {
        const auto& s = end->summary;
        const json j = summary_to_json(s);
        Stmt u(m_db,
               "UPDATE run SET status = ?, ended_utc = strftime('%Y-%m-%dT%H:%M:%SZ','now'), "
               "summary_json = ? WHERE run_id = ?");
        u.bind(1, std::string(trace::to_string(s.status)))
            .bind(2, j.dump())
            .bind(3, m_db_run.at(end->run_id))
            .run();
        return;
    }
    const auto& r = *std::get<std::shared_ptr<const trace::StepRecord>>(item);
    const int64_t run = m_db_run.at(r.run_id);
    const json triggers = triggers_to_json(r.triggers);

    Stmt s(m_db,
           "INSERT INTO step(run_id, step, block, step_in_block, seq_len, n_layers, wall_ms, "
           "flops, flops_full,"
           " recompute_fraction, n_committed, triggers_json, token_text_json, has_oracle, "
           "oracle_logits_kl,"
           " oracle_commit_differs) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    s.bind(1, run)
        .bind(2, int64_t{r.step})
        .bind(3, int64_t{r.block})
        .bind(4, int64_t{r.step_in_block});
    s.bind(5, int64_t{r.seq_len})
        .bind(6, int64_t{r.n_layers})
        .bind(7, r.wall_ms)
        .bind(8, r.flops)
        .bind(9, r.flops_full);
    s.bind(10, r.recompute_fraction())
        .bind(11, static_cast<int64_t>(r.committed.size()))
        .bind(12, triggers.dump());
    s.bind(13, token_text_to_json(r.new_token_text).dump()).bind(14, int64_t{r.has_oracle});
    s.bind(15, r.has_oracle ? r.oracle.logits_kl : 0.0)
        .bind(16, int64_t{r.has_oracle && r.oracle.commit_differs});
    s.run();

    Stmt a(m_db,
           "INSERT INTO array(run_id, step, name, dtype, shape, encoding, data) VALUES "
           "(?,?,?,?,?,?,?)");
    auto put = [&](const char* name, const EncodedArray& e) {
        a.bind(1, run)
            .bind(2, int64_t{r.step})
            .bind(3, std::string(name))
            .bind(4, e.dtype)
            .bind(5, e.shape);
        a.bind(6, e.encoding).bind_blob(7, e.data).run();
    };
    const int64_t L = r.seq_len, N = r.n_layers;
    std::vector<uint8_t> states(r.states.size()), actions(r.actions.size());
    for (size_t i = 0; i < states.size(); ++i) states[i] = static_cast<uint8_t>(r.states[i]);
    for (size_t i = 0; i < actions.size(); ++i) actions[i] = static_cast<uint8_t>(r.actions[i]);
    put("tokens", encode_array(r.tokens, {L}, true));
    put("states", encode_array(states, {L}, true));
    put("predicted", encode_array(r.predicted, {L}, true));
    put("confidence", encode_array(r.confidence, {L}, true));
    put("committed", encode_array(r.committed, {static_cast<int64_t>(r.committed.size())}, false));
    put("actions", encode_array(actions, {N, L}, true));
    put("cache_age", encode_array(r.cache_age, {N, L}, true));
    put("layer_ms", encode_array(r.layer_ms, {static_cast<int64_t>(r.layer_ms.size())}, false));
    if (!r.topk_ids.empty()) {
        const int64_t K = trace::StepRecord::kTopK;
        put("topk_ids", encode_array(r.topk_ids, {L, K}, true));
        put("topk_probs", encode_array(r.topk_probs, {L, K}, true));
        put("entropy", encode_array(r.entropy, {L}, true));
        put("margin", encode_array(r.margin, {L}, true));
    }
    if (r.has_oracle) {
        put("oracle_k_cos", encode_array(r.oracle.k_cos, {N, L}, true));
        put("oracle_v_cos", encode_array(r.oracle.v_cos, {N, L}, true));
        put("oracle_k_rel_l2", encode_array(r.oracle.k_rel_l2, {N, L}, true));
        put("oracle_v_rel_l2", encode_array(r.oracle.v_rel_l2, {N, L}, true));
    }
    if (!r.attention.empty()) {
        const bool four_bit = m_options.attention_bits == 4;
        Stmt at(m_db,
                "INSERT INTO attention(run_id, step, layer, head, rows, cols, row_index, "
                "row_scale, quant, encoding, data)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?)");
        for (const auto& m : r.attention) {
            // rowmax-uN: each query row is scaled by its own maximum (the record already holds
            // 8-bit levels of it, trace::AttentionMap). Rows keep their shape at any sequence
            // length, and the many near-zero probabilities become exact zeros, which zstd
            // compresses to almost nothing (sessions stay small). 4-bit rows are packed two
            // columns per byte (low nibble first), each row starting on a byte: half the bytes
            // for zstd to chew on, which also halves the writer's CPU time.
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
                    for (size_t c = 0; c < cols; ++c)
                        out[c] = in[c] < kAttentionFloorU8 ? 0 : in[c];
                }
            }
            // zstd level 1: on these quantised rows levels 3 and 7 save under 2% (measured on a
            // G=256 run: 29.7 / 29.8 / 29.4 MB at levels 1 / 3 / 7) for several times the CPU time.
            auto data = encode_array(q, {m.rows, static_cast<int64_t>(row_bytes)}, true, 1);
            auto rows = encode_array(m.row_index, {m.rows}, false);
            auto scales = encode_array(m.row_scale, {m.rows}, false);
            at.bind(1, run)
                .bind(2, int64_t{r.step})
                .bind(3, int64_t{m.layer})
                .bind(4, int64_t{m.head});
            at.bind(5, int64_t{m.rows})
                .bind(6, int64_t{m.cols})
                .bind_blob(7, rows.data)
                .bind_blob(8, scales.data);
            at.bind(9, std::string(four_bit ? "rowmax-u4" : "rowmax-u8"));
            at.bind(10, data.encoding);
            at.bind_blob(11, data.data).run();
        }
    }
}

}  // namespace cl::sessions
