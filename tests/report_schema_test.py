#!/usr/bin/env python3
"""Real `verify --format json` reports against docs/report.schema.json.

Usage: report_schema_test.py SHARDPROOF_BINARY
Every verdict's report (equivalent, not equivalent, unknown, invalid, a missing file, several
plans at once) is produced by the binary and validated; then a report with a field broken must
fail validation, so the check can fail. Needs python3-jsonschema (scripts/setup.sh installs it).
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError:
    print("report_schema_test: python3-jsonschema is missing (scripts/setup.sh installs it)")
    sys.exit(1)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(binary, *args):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "CI": "true"})
    return p.returncode, p.stdout, p.stderr


def main():
    binary = sys.argv[1]
    with open(os.path.join(ROOT, "docs", "report.schema.json")) as f:
        schema = json.load(f)
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema)
    failures = []

    with tempfile.TemporaryDirectory() as tmp:
        def plan(name, *flags):
            path = os.path.join(tmp, name + ".json")
            rc, _, err = run(binary, "plan", "llama3-tiny", "--layers", "1", "--tp", "2",
                             *flags, "-o", path)
            assert rc == 0, err
            return path

        good = plan("good")
        bug = plan("bug", "--bug", "row-parallel-no-allreduce")
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            f.write('{"format": "x"}')
        cases = {
            "equivalent": ([good], 0),
            "not-equivalent": ([bug], 1),
            "invalid": ([bad], 2),
            "missing file": ([os.path.join(tmp, "absent.json")], 2),
            "unknown": ([good, "--rlimit", "1"], 3),
            "several plans": ([good, bug], 1),
        }
        reports = {}
        for name, (args, want_rc) in cases.items():
            rc, out, err = run(binary, "verify", "--no-daemon", "--no-cache", "--format", "json",
                               *args)
            if rc != want_rc:
                failures.append(f"{name}: exit {rc}, expected {want_rc}: {err}")
                continue
            report = json.loads(out)
            reports[name] = report
            for e in validator.iter_errors(report):
                failures.append(f"{name}: {e.message} at {list(e.absolute_path)}")

        # The schema must reject what it promises never happens.
        broken = []
        if "not-equivalent" in reports:
            r = copy.deepcopy(reports["not-equivalent"])
            r["findings"] = []
            broken.append(("a not-equivalent report without findings", r))
            r = copy.deepcopy(reports["not-equivalent"])
            r["verdict"] = "maybe"
            broken.append(("an unknown verdict name", r))
            r = copy.deepcopy(reports["not-equivalent"])
            del r["findings"][0]["stage"]
            broken.append(("a finding without its stage", r))
        if "invalid" in reports:
            r = copy.deepcopy(reports["invalid"])
            del r["error"]
            broken.append(("an invalid report without its error", r))
        for name, r in broken:
            if validator.is_valid(r):
                failures.append(f"the schema accepts {name}")

    for f in failures:
        print("FAIL:", f)
    print(f"report_schema_test: {len(reports)} real reports, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
