// A per-column memo for panels that summarise every step up to the cursor (K/V drift, decode
// order): the value is computed once per (run, step record) instead of every frame. Records are
// immutable, so the first record and the record at the cursor identify the steps before it (a
// re-run publishes new records). The canvas is drawn on one thread only.
#pragma once

#include <map>

#include "viz/panels/panels.h"

namespace cl::viz {

template <typename T>
class StepMemo {
public:
    // The value for column `c` (c.step >= 0, steps not empty), from `compute()` when stale.
    template <typename F>
    const T& get(const ColumnContext& c, F&& compute) {
        Entry& e = m_by_run[c.run.info.run_id];
        const auto* first = c.run.steps.front().get();
        const auto* at = c.run.steps[static_cast<size_t>(c.step)].get();
        if (e.first != first || e.at != at) {
            e.value = compute();
            e.first = first;
            e.at = at;
        }
        return e.value;
    }

private:
    struct Entry {
        const trace::StepRecord* first = nullptr;
        const trace::StepRecord* at = nullptr;
        T value{};
    };
    std::map<int32_t, Entry> m_by_run;
};

}  // namespace cl::viz
