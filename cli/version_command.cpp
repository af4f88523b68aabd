// `shardproof version`: the tool's version and the Z3 it proves with (both
// are part of every cached verdict's key, so bug reports need them).
#include <iostream>

#include "cli/commands.h"
#include "cli/usage.h"

namespace shardproof::cli {

CLI::App* add_version_command(CLI::App& app) {
  return app.add_subcommand("version", "Print the version of shardproof and of Z3");
}

int run_version() {
  std::cout << version_text() << "\n";
  return kExitOk;
}

}  // namespace shardproof::cli
