// `cachelens-cli policies`: every policy with its parameters, paper defaults and ranges.
#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "engine/generation/policy_registry.h"

namespace cl::cli {

namespace {

void print_param(const ParamSpec& s) {
    std::string choices;
    for (size_t i = 0; i < s.choices.size(); ++i)
        choices += (i ? ", " : " (") + std::to_string(i) + " " + s.choices[i];
    if (!choices.empty()) choices += ")";
    std::printf("    %-18s %-7s default %-6g paper %-6g range [%g, %g]  %s%s\n", s.name.c_str(),
                to_string(s.type), s.default_value, s.paper_default, s.min, s.max, s.help.c_str(),
                choices.c_str());
}

}  // namespace

void add_policies_command(CLI::App& root, Runner& run) {
    auto* cmd = root.add_subcommand("policies", "List the cache policies and their parameters");
    cmd->callback([&run] {
        run = [] {
            for (const auto& p : list_policies()) {
                std::printf("%-12s %s\n", p.name.c_str(), p.summary.c_str());
                for (const auto& s : p.params) print_param(s);
                if (!p.own_decoding.empty())
                    std::printf("    own decoding: %s\n", p.own_decoding.describe().c_str());
            }
            return kOk;
        };
    });
}

}  // namespace cl::cli
