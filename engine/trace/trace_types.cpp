#include "engine/trace/trace_types.h"

namespace cl::trace {

double StepRecord::recompute_fraction() const {
    if (actions.empty()) return 0.0;
    size_t computed = 0;
    for (RowAction a : actions) computed += (a == RowAction::Recomputed);
    return static_cast<double>(computed) / static_cast<double>(actions.size());
}

}  // namespace cl::trace
