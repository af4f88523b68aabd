// Verifies plan files one after the other through the daemon (started when
// none answers) or in process, as `verify` and `hooks run` do: the plan's
// graph files are inlined before it is sent, an invalid plan is reported
// from its real files, and a daemon that fails is replaced by the engine in
// this process (with a warning on stderr).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/verify_backend.h"
#include "engine/report/report.h"
#include "engine/verifier.h"

namespace shardproof::cli {

// The plan path that means stdin, and the name its report carries.
inline constexpr const char* kStdinPath = "-";
inline constexpr const char* kStdinName = "<stdin>";

class PlanVerifier {
 public:
  // Uses args.no_daemon, args.no_cache and args.jobs (for a daemon it starts).
  explicit PlanVerifier(const VerifyArgs& args);
  // `text_read`, when given, receives the plan's text as read (left alone
  // when it could not be read): the CI formats look up where findings are.
  Report verify(const std::string& path, const VerifyOptions& options,
                std::optional<std::string>* text_read = nullptr);
  // Whether verifications read and write the cache (not --no-cache): a
  // harness's capture is then kept in it too (cli/harness.h).
  bool caches() const { return !args_.no_cache; }

 private:
  // The plan's text as read from `path`.
  Report verify_text(const std::string& path, const std::string& original,
                     const VerifyOptions& options);
  std::unique_ptr<VerifyBackend> in_process();

  VerifyArgs args_;
  std::unique_ptr<VerifyBackend> backend_;
};

}  // namespace shardproof::cli
