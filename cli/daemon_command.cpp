// `shardproof daemon start|stop|status|restart|run`: the background
// verifier that keeps solver threads and the cache warm between runs.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cache/cache_location.h"
#include "cli/capture_server.h"
#include "cli/commands.h"
#include "cli/settings.h"
#include "cli/usage.h"
#include "daemon/client.h"
#include "daemon/launcher.h"
#include "daemon/pid_lock.h"
#include "daemon/server.h"
#include "daemon/state_dir.h"
#include "engine/core/units.h"

namespace shardproof::cli {
namespace {

using nlohmann::json;

constexpr int kDefaultIdleTimeout = 3600;

int idle_timeout(const DaemonArgs& args) {
  if (args.idle_timeout >= 0) return args.idle_timeout;
  if (const char* env = std::getenv("SHARDPROOF_DAEMON_IDLE_TIMEOUT")) {
    if (auto seconds = parse_duration_seconds(env)) return static_cast<int>(*seconds);
  }
  return kDefaultIdleTimeout;
}

// What `start` passes on to the `run` it launches.
std::vector<std::string> run_args(const DaemonArgs& args) {
  std::vector<std::string> out;
  if (args.jobs > 0) out.insert(out.end(), {"--jobs", std::to_string(args.jobs)});
  if (args.idle_timeout >= 0)
    out.insert(out.end(), {"--idle-timeout", std::to_string(args.idle_timeout)});
  if (!args.max_frame.empty()) out.insert(out.end(), {"--max-frame", args.max_frame});
  return out;
}

int fail(const std::string& message, int code = kExitInternal) {
  std::cerr << "shardproof daemon: " << message << "\n";
  return code;
}

int run(const DaemonArgs& args, const daemon::DaemonPaths& paths) {
  daemon::DaemonConfig config;
  config.paths = paths;
  config.cache_dir = paths.cache_dir;
  config.cache_max_bytes = cache::default_max_bytes();
  config.jobs = args.jobs;
  config.idle_timeout_seconds = idle_timeout(args);
  if (!args.max_frame.empty()) {
    std::optional<uint64_t> limit = parse_size(args.max_frame);
    if (!limit || *limit < 1024)
      return fail("--max-frame: expected a size of at least 1K", kExitUsage);
    config.frame_limit = *limit;
  }
  return daemon::run_daemon(config);
}

int start(const DaemonArgs& args, const daemon::DaemonPaths& paths) {
  Status status;
  if (auto client = daemon::DaemonClient::connect(paths.socket, &status)) {
    std::cout << "already running (pid " << client->hello().value("pid", 0) << ")\n";
    return kExitOk;
  }
  if (Status s = daemon::start_daemon(paths, run_args(args)); !s.ok()) return fail(s.message());
  auto client = daemon::DaemonClient::connect(paths.socket, &status);
  std::cout << "started (pid " << (client ? client->hello().value("pid", 0) : 0) << ", socket "
            << paths.socket << ")\n";
  return kExitOk;
}

int stop(const daemon::DaemonPaths& paths) {
  bool was_running = false;
  if (Status s = daemon::stop_daemon(paths, &was_running); !s.ok()) return fail(s.message());
  std::cout << (was_running ? "stopped" : "not running") << "\n";
  // The capture servers are this user's other background processes.
  if (const int servers = stop_capture_servers(); servers > 0)
    std::cout << "stopped " << servers << " capture server" << (servers > 1 ? "s" : "")
              << " (each exits within 5 s)\n";
  return kExitOk;
}

int status(const DaemonArgs& args, const daemon::DaemonPaths& paths) {
  Status why;
  auto client = daemon::DaemonClient::connect(paths.socket, &why);
  json answer;
  if (client) why = client->call({{"type", "status"}}, nullptr, &answer, {}, 5000);
  bool answered = client && why.ok() && answer.value("type", std::string()) == "result";
  // A daemon holds its lock for its whole life: one that holds it but does
  // not answer is busy (every connection taken, stopped, hung), not gone.
  pid_t holder = answered ? 0 : daemon::lock_holder(paths.lock);
  bool running = answered || holder != 0;
  if (args.format == "json") {
    json out = answered ? answer["result"] : json{{"socket", paths.socket}};
    out["running"] = running;
    out["busy"] = !answered && running;
    if (!answered && running) {
      out["pid"] = static_cast<int64_t>(holder);
      out["why"] = why.message();
    }
    std::cout << out.dump(2) << "\n";
  } else if (!running) {
    std::cout << "not running (socket " << paths.socket << ")\n";
  } else if (!answered) {
    std::cout << "busy: the daemon (pid " << holder << ") holds its lock but did not answer ("
              << why.message() << ")\n";
  } else {
    const json& s = answer["result"];
    std::cout << "running: pid " << s.value("pid", 0) << ", up "
              << static_cast<int64_t>(s.value("uptime_seconds", 0.0)) << " s\n"
              << "socket: " << s.value("socket", std::string()) << "\n"
              << "build: " << s.value("build", std::string()) << "\n"
              << "cache: " << (s["cache"].is_string() ? s["cache"].get<std::string>() : "none")
              << "\n"
              << "requests: " << s.value("verifies", 0) << " verified, "
              << s.value("active_requests", 0)
              << " running; connections: " << s.value("connections", 0) << "\n"
              << "solver: " << s.value("jobs", 0) << " workers, " << s.value("busy_workers", 0)
              << " busy; " << s.value("stages_in_flight", 0) << " stages in flight, "
              << s.value("stages_joined", 0) << " joined\n"
              << "memory: " << format_bytes(s.value("rss_bytes", uint64_t{0})) << " resident\n"
              << "log: " << s.value("log", std::string()) << "\n";
    for (const json& r : s.value("requests", json::array())) {
      char age[32];
      std::snprintf(age, sizeof age, "%.1f s", r.value("seconds", 0.0));
      std::cout << "request " << r.value("id", 0) << ": " << r.value("plan", std::string()) << ", "
                << r.value("phase", std::string()) << ", stages " << r.value("done", 0) << "/"
                << r.value("total", 0) << ", " << age << "\n";
    }
  }
  return running ? kExitOk : 1;
}

}  // namespace

CLI::App* add_daemon_command(CLI::App& app, DaemonArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "daemon", "Run the verifier in the background, keeping solver threads and the cache warm");
  cmd->require_subcommand(1);
  // Each action is its own subcommand with only its own options: `daemon
  // stop --jobs 2` is a usage error, not a silently ignored flag.
  auto action = [&](const char* name, const char* what) {
    CLI::App* sub = cmd->add_subcommand(name, what);
    sub->callback([&args, name] { args.action = name; });
    return sub;
  };
  auto server_options = [&](CLI::App* sub) {
    sub->add_option("--jobs,-j", args.jobs, "Solver threads (0: all cores)")
        ->check(between("--jobs", 0, kMaxJobs, "0: all cores"));
    sub->add_option("--idle-timeout", args.idle_timeout,
                    "Exit after this many seconds without requests (0: never; default "
                    "$SHARDPROOF_DAEMON_IDLE_TIMEOUT or 3600)")
        ->check(between("--idle-timeout", 0, INT32_MAX, "seconds; 0: never"));
    sub->add_option("--max-frame", args.max_frame, "Largest request frame accepted (default 256M)");
  };
  server_options(action("start", "Start the daemon in the background (if none runs)"));
  server_options(action("restart", "Stop the daemon, then start it again"));
  server_options(action("run", "Run the daemon in the foreground (what `start` launches)"));
  action("stop", "Stop the daemon");
  CLI::App* status = action("status", "Show the daemon: pid, uptime, memory, log, requests");
  status->add_option("--format", args.format, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  status->add_flag_callback(
      "--json", [&args] { args.format = "json"; }, "Same as --format json");
  action("cancel", "Cancel a running verify (its answer is unknown), or every one")
      ->add_option("request", args.request, "The request's id, as `daemon status` shows it");
  return cmd;
}

int cancel(const DaemonArgs& args, const daemon::DaemonPaths& paths) {
  Status why;
  auto client = daemon::DaemonClient::connect(paths.socket, &why);
  if (!client) return fail("not running (" + why.message() + ")", 1);
  json request = {{"type", "cancel"}};
  if (args.request > 0) request["request"] = args.request;
  json answer;
  why = client->call(request, nullptr, &answer, {}, 5000);
  if (!why.ok()) return fail(why.message());
  if (answer.value("type", std::string()) != "result")
    return fail(answer.value("message", std::string("the daemon refused")));
  int n = answer["result"].value("cancelled", 0);
  std::cout << "cancelled " << n << (n == 1 ? " request" : " requests") << "\n";
  // Naming one that is not running is a mistake worth an exit code.
  return args.request > 0 && n == 0 ? 1 : kExitOk;
}

int run_daemon_command(const DaemonArgs& args) {
  // The remote cache settings are part of the daemon's identity (its socket).
  resolve_and_export_local_settings({});
  daemon::DaemonPaths paths;
  if (Status s = daemon::daemon_paths(cache::default_cache_dir(), &paths); !s.ok())
    return fail(s.message());
  if (args.action == "run") return run(args, paths);
  if (args.action == "start") return start(args, paths);
  if (args.action == "stop") return stop(paths);
  if (args.action == "status") return status(args, paths);
  if (args.action == "cancel") return cancel(args, paths);
  if (int code = stop(paths); code != kExitOk) return code;  // restart
  return start(args, paths);
}

}  // namespace shardproof::cli
