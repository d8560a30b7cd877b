// cachelens-cli: the headless front-end of CacheLens. Exit codes: 0 success, 1 runtime failure,
// 2 bad usage or bad input; errors are printed on one line naming the file or option at fault.
#include <spdlog/spdlog.h>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "engine/base/errors.h"

int main(int argc, char** argv) {
    using namespace cl::cli;
    CLI::App app{"cachelens-cli: run and measure KV/feature-cache policies for diffusion LLMs"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("cachelens-cli ") + CL_VERSION);
    Runner run;
    add_generate_command(app, run);
    add_inspect_model_command(app, run);
    add_init_model_command(app, run);
    add_train_command(app, run);
    add_eval_command(app, run);
    add_drift_command(app, run);
    add_sweep_steps_command(app, run);
    add_sweep_command(app, run);
    add_compare_command(app, run);
    add_bench_command(app, run);
    add_policies_command(app, run);
    add_sessions_commands(app, run);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "cachelens-cli: %s\n", e.what());
        return kBadInput;
    }
    try {
        return run ? run() : kBadInput;
    } catch (const cl::InputError& e) {
        std::fprintf(stderr, "cachelens-cli: error: %s\n", cl::cli_message(e).c_str());
        return kBadInput;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cachelens-cli: failure: %s\n", e.what());
        return kRuntimeFailure;
    }
}
