// `cachelens-cli policies`: every policy with its parameters, paper defaults and ranges.
#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "engine/generation/policy_registry.h"

namespace cl::cli {

void add_policies_command(CLI::App& root, Runner& run) {
    auto* cmd = root.add_subcommand("policies", "List the cache policies and their parameters");
    cmd->callback([&run] {
        run = [] {
            for (const auto& p : list_policies()) {
                std::printf("%-12s %s\n", p.name.c_str(), p.summary.c_str());
                for (const auto& s : p.params)
                    std::printf("    %-18s default %-8g range [%g, %g]%s  %s\n", s.name.c_str(),
                                s.default_value, s.min, s.max, s.integer ? " int" : "",
                                s.help.c_str());
                for (const auto& [k, v] : p.own_decoding)
                    std::printf("    own decoding: %s = %g\n", k.c_str(), v);
            }
            return kOk;
        };
    });
}

}  // namespace cl::cli
