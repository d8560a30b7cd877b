// Export from the app: per-step metrics of every shown run as CSV or JSON (torch-free).
#pragma once

#include <string>
#include <vector>

#include "viz/viz_context.h"

namespace cl::app {

// Returns "" on success, else an error naming the file.
std::string export_metrics_csv(const std::vector<viz::RunView>& runs, const std::string& path);
std::string export_metrics_json(const std::vector<viz::RunView>& runs, const std::string& path);

}  // namespace cl::app
