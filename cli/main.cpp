// Entry point of `shardproof`: parses the command line with CLI11 and hands
// over to one subcommand. Usage errors exit 2, --help exits 0.
#include <malloc.h>

#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/interrupt.h"
#include "cli/settings.h"
#include "cli/usage.h"

int main(int argc, char** argv) {
  using namespace shardproof::cli;
  // Each stage proof builds and frees a Z3 context; on the main thread's heap
  // glibc would hand that memory back to the kernel every time (brk), which
  // made in-process proving ~10x slower than on worker threads. Keep a pad.
  mallopt(M_TOP_PAD, 64 << 20);

  CLI::App app{
      "shardproof: proves that a distributed training plan computes exactly what the "
      "single-device model computes."};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text);

  VerifyArgs verify_args;
  PlanArgs plan_args;
  DaemonArgs daemon_args;
  CacheArgs cache_args;
  HooksArgs hooks_args;
  CaptureArgs capture_args;
  CLI::App* verify = add_verify_command(app, verify_args);
  CLI::App* plan = add_plan_command(app, plan_args);
  CLI::App* daemon = add_daemon_command(app, daemon_args);
  CLI::App* cache = add_cache_command(app, cache_args);
  CLI::App* hooks = add_hooks_command(app, hooks_args);
  CLI::App* capture = add_capture_command(app, capture_args);
  CLI::App* version = add_version_command(app);
  CLI::App* eval = add_eval_command(app);
  ConfigArgs config_args;
  CLI::App* config = add_config_command(app, config_args);
  std::vector<std::string> help_words;
  CLI::App* help = add_help_command(app, help_words);

  if (int code = precheck_command(app, argc, argv); code >= 0) return code;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints help/version/errors itself; only the code is ours to fix:
    // every usage error is 2, whatever CLI11's internal error number.
    if (app.exit(e) == 0) return kExitOk;
    std::cerr << suggestions(app, argc, argv);
    return kExitUsage;
  }
  if (help->parsed()) return run_help(app, help_words);
  warn_about_malformed_environment();

  // `daemon run` stops on signals through its event loop; the rest here.
  if (!(daemon->parsed() && daemon_args.action == "run")) handle_interrupts();

  try {
    if (verify->parsed()) return run_verify(verify_args);
    if (plan->parsed()) return run_plan(plan_args);
    if (daemon->parsed()) return run_daemon_command(daemon_args);
    if (cache->parsed()) return run_cache_command(cache_args);
    if (hooks->parsed()) return run_hooks_command(hooks_args);
    if (capture->parsed()) return run_capture(capture_args);
    if (version->parsed()) return run_version();
    if (eval->parsed()) return run_eval_command();
    if (config->parsed()) return run_config(config_args);
  } catch (const std::exception& e) {
    std::cerr << "shardproof: internal error: " << e.what() << "\n";
    return kExitInternal;
  }
  return kExitUsage;
}
