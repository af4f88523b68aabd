// `shardproof version`: the tool's version and the Z3 it proves with (both
// are part of every cached verdict's key, so bug reports need them).
#include <iostream>

#include <z3.h>

#include "cli/commands.h"

namespace shardproof::cli {

CLI::App* add_version_command(CLI::App& app) {
  return app.add_subcommand("version", "Print the version of shardproof and of Z3");
}

int run_version() {
  unsigned major = 0, minor = 0, build = 0, revision = 0;
  Z3_get_version(&major, &minor, &build, &revision);
  std::cout << "shardproof " << SHARDPROOF_VERSION << "\n"
            << "z3 " << major << "." << minor << "." << build << "\n";
  return kExitOk;
}

}  // namespace shardproof::cli
