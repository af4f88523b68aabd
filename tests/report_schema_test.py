#!/usr/bin/env python3
"""Real `verify --format json` reports against docs/report.schema.json.

Usage: report_schema_test.py SHARDPROOF_BINARY
Every verdict's report (equivalent, not equivalent, unknown, invalid, a missing file, several
plans at once, a cold and a warm cache, a compact plan verified per class) is produced by the
binary and validated, and its counts of distinct stages must add up (a sum the schema states
but cannot check); then a report with a field broken must fail validation, so the check can
fail. Needs python3-jsonschema (scripts/setup.sh installs it).
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


DECIDED = ["proven_trivially", "solved", "refuted_by_testing", "symmetric", "untried", "cached",
           "shared_proofs", "reused"]


def run(binary, *args, env=None):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "CI": "true", **(env or {})})
    return p.returncode, p.stdout, p.stderr


def counts_add_up(report):
    """None, or why the categories of distinct stages do not sum to unique_stages."""
    stats = report["stats"]
    total = sum(stats.get(k, 0) for k in DECIDED)
    if total != stats["unique_stages"]:
        return f"{' + '.join(f'{k} {stats.get(k)}' for k in DECIDED)} = {total}, " \
               f"not unique_stages {stats['unique_stages']}"
    return None


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
        compact = plan("compact", "--compact")
        cache = {"SHARDPROOF_CACHE_DIR": os.path.join(tmp, "cache")}
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            f.write('{"format": "x"}')
        no_cache = ["--no-cache"]
        cases = {
            "equivalent": ([good], 0, no_cache),
            "not-equivalent": ([bug], 1, no_cache),
            "invalid": ([bad], 2, no_cache),
            "missing file": ([os.path.join(tmp, "absent.json")], 2, no_cache),
            "unknown": ([good, "--rlimit", "1"], 3, no_cache),
            "several plans": ([good, bug], 1, no_cache),
            "per class": ([compact, "--classes"], 0, no_cache),
            "cold cache": ([bug], 1, []),
            "warm cache": ([bug], 1, []),
            "warm cache, another plan": ([good], 0, []),
        }
        reports = {}
        for name, (args, want_rc, flags) in cases.items():
            rc, out, err = run(binary, "verify", "--no-daemon", *flags, "--format", "json",
                               *args, env=cache)
            if rc != want_rc:
                failures.append(f"{name}: exit {rc}, expected {want_rc}: {err}")
                continue
            report = json.loads(out)
            reports[name] = report
            for e in validator.iter_errors(report):
                failures.append(f"{name}: {e.message} at {list(e.absolute_path)}")
            for r in report if isinstance(report, list) else [report]:
                if (why := counts_add_up(r)):
                    failures.append(f"{name}: {why}")
        if "warm cache" in reports and reports["warm cache"]["stats"]["cached"] == 0:
            failures.append("warm cache: nothing came from the cache")

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
        if "equivalent" in reports:
            r = copy.deepcopy(reports["equivalent"])
            r["stats"]["solved"] += 1
            if counts_add_up(r) is None:
                failures.append("counts_add_up accepts a stage counted twice")

    for f in failures:
        print("FAIL:", f)
    print(f"report_schema_test: {len(reports)} real reports, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
