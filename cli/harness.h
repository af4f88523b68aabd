// Torch harnesses (docs/torch-harness.md): a `.py` argument of `verify` or
// `capture` is captured into a plan by the PyTorch front end
// (frontends/torch, pure Python), run as
//   $SHARDPROOF_PYTHON -m shardproof_torch capture H.py [--mesh M] -o PLAN --emit src,scale
// Where the interpreter and the front end are is docs/cli.md's "Harnesses".
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "engine/report/report.h"
#include "engine/verifier.h"

namespace shardproof::cli {

// True for a harness argument: a path ending in ".py".
bool is_harness_path(const std::string& path);

struct CaptureOutcome {
  int exit_code = 4;    // the front end's: 0 captured, 2 invalid harness, 4 internal
  std::string message;  // what it wrote on stderr (its `file:line: [rule] text` line on exit 2)
  // Starts a capture server for the next capture (cli/capture_server.h);
  // empty when one served this capture or none is wanted. Call it when done.
  std::function<void()> start_capture_server;
};

// Captures `harness` (with `mesh`, "dp=2,tp=4" or empty) into the plan file
// `output`. Never throws: a missing interpreter or front end is exit 2 with
// a message that says what to install or set.
// The front end runs in `cwd` (empty: this process's), which its source
// locations are relative to.
// `captures`, when not empty, is the directory the front end keeps captures
// in and takes an unchanged one from (frontends/torch capture_cache.py).
CaptureOutcome capture_harness(const std::string& harness, const std::string& mesh,
                               const std::string& output, const std::string& cwd = "",
                               const std::string& captures = "");

// The cache's directory of kept captures (empty: no cache directory).
// `verify H.py` uses it unless --no-cache; `cache clear` empties it.
std::string captures_dir();

// The report of a harness that could not be captured: invalid (exit 2) with
// the front end's `file:line: [rule] text` as its diagnostic, or an internal
// error (exit 4).
Report capture_failure_report(const std::string& harness, const CaptureOutcome& outcome);

class PlanVerifier;

// A harness captured into a plan in a private directory (or taken from the
// kept captures when nothing it read changed: captures_dir(), unless the
// verifier does not cache), then verified like any plan by `verifier`
// (through the daemon, so cached stages are reused).
// The report names the harness; a harness that cannot be captured is
// invalid (exit 2) with the front end's `file:line: [rule]` message. A
// captured plan the engine refuses is kept, and its path said on stderr.
// `plan_text`, when given, receives the captured plan's text as the verifier
// read it (for the ranks and the mesh findings fail in; locate_report).
Report verify_harness(PlanVerifier& verifier, const std::string& harness, const std::string& mesh,
                      const VerifyOptions& options, const std::string& cwd = "",
                      std::optional<std::string>* plan_text = nullptr);

// A private temporary directory, removed with everything in it on
// destruction unless keep() was called.
class CaptureDir {
 public:
  CaptureDir();
  ~CaptureDir();
  CaptureDir(const CaptureDir&) = delete;
  CaptureDir& operator=(const CaptureDir&) = delete;
  const std::string& path() const { return path_; }
  void keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

}  // namespace shardproof::cli
