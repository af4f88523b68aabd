"""The example workflow (ci/github-actions.yml) keeps the properties
docs/integration.md promises: runs on pull requests and on pushes to the
default branch (so pull requests restore a warm cache), has a timeout, uses
the remote cache only when the team key is configured (a fork's pull request
has no secrets and runs on the local cache), never uploads SARIF from a fork,
and verifies once with every report as an --output of that one run."""
import sys

import yaml

path = sys.argv[1]
with open(path, encoding="utf-8") as f:
    text = f.read()
doc = yaml.safe_load(text)
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` as true
check(isinstance(on, dict) and "pull_request" in on, "runs on pull_request")
push = (on or {}).get("push") or {}
check(push.get("branches") == ["main"], "runs on pushes to the default branch (main)")

job = doc["jobs"]["verify-plans"]
check(isinstance(job.get("timeout-minutes"), int) and 0 < job["timeout-minutes"] <= 120,
      "the job sets timeout-minutes")
steps = job["steps"]
by_name = {s.get("name"): s for s in steps}

has_remote = job.get("env", {}).get("HAS_REMOTE_CACHE", "")
check("secrets.SHARDPROOF_CACHE_KEY" in has_remote,
      "the remote cache depends on the key secret being present")
remote = by_name.get("Remote cache", {})
check(remote.get("if") == "env.HAS_REMOTE_CACHE == 'true'",
      "the remote cache step runs only when the key is configured")
check("SHARDPROOF_REMOTE_CACHE=" in remote.get("run", "") and
      "SHARDPROOF_CACHE_KEY_FILE=" in remote.get("run", ""),
      "the remote cache step sets SHARDPROOF_REMOTE_CACHE and SHARDPROOF_CACHE_KEY_FILE")
# Secrets reach no other step: a fork's run has nothing that needs them.
for s in steps:
    if s is not remote:
        check("secrets." not in yaml.safe_dump(s), "only the remote cache step reads secrets: %s"
              % s.get("name"))

upload = by_name.get("Upload findings to code scanning", {})
check("head.repo.full_name == github.repository" in upload.get("if", ""),
      "SARIF is not uploaded from a fork's pull request")

verify = by_name.get("Verify", {}).get("run", "")
check(verify.count("shardproof verify") == 1, "verify runs once")
for fmt in ("sarif", "junit", "html"):
    check("--output %s=" % fmt in verify, "verify writes --output %s=" % fmt)
check("--format github" in verify, "verify annotates (--format github)")
check("--no-daemon" in verify, "verify runs in process (no daemon left behind)")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
