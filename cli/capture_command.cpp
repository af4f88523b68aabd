// `shardproof capture H.py [--mesh dp=2,tp=4] [-o plan.json]`: captures a
// torch harness (docs/torch-harness.md) into a plan with the PyTorch front
// end (cli/harness.h), without verifying it. `verify H.py` does the same
// and verifies the plan.
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "cli/harness.h"
#include "engine/format/file_text.h"

namespace shardproof::cli {

CLI::App* add_capture_command(CLI::App& app, CaptureArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "capture", "Capture a PyTorch training step (a harness file, .py) into a plan");
  cmd->add_option("harness", args.harness, "The harness file (docs/torch-harness.md)")
      ->required();
  cmd->add_option("--mesh", args.mesh,
                  "Mesh sizes overriding the harness's MESH, e.g. dp=2,tp=4");
  cmd->add_option("--output,-o", args.output, "Plan file to write (-: stdout)")
      ->capture_default_str();
  return cmd;
}

int run_capture(const CaptureArgs& args) {
  CaptureDir dir;
  const bool to_stdout = args.output == "-";
  const std::string plan = to_stdout ? dir.path() + "/plan.json" : args.output;
  const CaptureOutcome outcome = capture_harness(args.harness, args.mesh, plan);
  if (outcome.start_capture_server && outcome.exit_code != 4) outcome.start_capture_server();
  if (!outcome.message.empty()) std::cerr << outcome.message << "\n";
  if (outcome.exit_code != 0) {
    if (outcome.exit_code != 2 && outcome.message.empty())
      std::cerr << "shardproof: capturing " << args.harness << " failed\n";
    return outcome.exit_code == 2 ? kExitUsage : kExitInternal;
  }
  if (!to_stdout) return kExitOk;
  std::optional<std::string> text = read_file_text(plan);
  if (!text) {
    std::cerr << "shardproof: the front end wrote no plan at " << plan << "\n";
    return kExitInternal;
  }
  std::cout << *text << std::flush;
  return std::cout ? kExitOk : kExitInternal;
}

}  // namespace shardproof::cli
