// The results file of a sweep (SQLite, docs/sweep-format.md): the spec it ran, one row per
// finished point and one per item of it, and the claims of the points workers are running.
// Every point is written in one transaction, so a sweep killed at any moment keeps every finished
// point and loses at most the ones in flight. Several worker processes share one file (WAL, a
// busy timeout); Slurm array tasks write a file each and `sweep merge` joins them.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sweep/sweep_results.h"

namespace cl::sweep {

inline constexpr int kSweepFormatVersion = 1;

// Thrown for unreadable, corrupt or newer results files; the message names the file.
struct SweepFileError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct SweepFileInfo {
    int format_version = 0;
    std::string spec_json;  // the spec as it was run (canonical JSON)
    std::string created_utc;
    int32_t total_points = 0;  // points the spec expands to
};

class SweepStore {
public:
    // Creates `path` for `spec_json`, or opens it when it exists and holds the same spec (a
    // resumed sweep); a file of another spec is refused. Throws SweepFileError.
    static std::unique_ptr<SweepStore> create_or_resume(const std::string& path,
                                                        const std::string& spec_json,
                                                        int32_t total_points);
    // Opens an existing file read-only. Throws SweepFileError.
    static std::unique_ptr<SweepStore> open(const std::string& path);
    ~SweepStore();
    SweepStore(const SweepStore&) = delete;
    SweepStore& operator=(const SweepStore&) = delete;

    const SweepFileInfo& info() const;
    const std::string& path() const;

    std::set<std::string> finished_keys() const;
    std::vector<PointResult> points() const;  // finished points, by index
    // Writes a finished point and its items in one transaction (replacing a row of the same
    // key) and drops its claim.
    void add_point(const PointResult& point);

    // Claims: the next point (by index, among `candidates`) that is neither finished nor claimed,
    // claimed atomically for `worker`; nullopt when none is left.
    std::optional<int32_t> claim_next(
        const std::vector<std::pair<int32_t, std::string>>& candidates, const std::string& worker);
    void clear_claims();  // at the start of a run: no worker of an earlier run is alive

private:
    SweepStore();
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// Joins shard files of one spec into `out` (created; a point in several shards is taken once).
// Throws SweepFileError when the shards' specs differ or a file is unreadable.
void merge_sweep_files(const std::vector<std::string>& shards, const std::string& out);

}  // namespace cl::sweep
