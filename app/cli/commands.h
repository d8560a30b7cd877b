// Each subcommand registers its options on the root app and sets `run` when it is selected.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace cl::cli {

using Runner = std::function<int()>;

void add_generate_command(CLI::App& root, Runner& run);
void add_inspect_model_command(CLI::App& root, Runner& run);
void add_init_model_command(CLI::App& root, Runner& run);
void add_train_command(CLI::App& root, Runner& run);
void add_eval_command(CLI::App& root, Runner& run);
void add_drift_command(CLI::App& root, Runner& run);
void add_compare_command(CLI::App& root, Runner& run);
void add_bench_command(CLI::App& root, Runner& run);
void add_policies_command(CLI::App& root, Runner& run);
void add_sessions_commands(CLI::App& root, Runner& run);
void add_sweep_steps_command(CLI::App& root, Runner& run);
void add_sweep_command(CLI::App& root, Runner& run);

}  // namespace cl::cli
