"""Programs written the way users write them (tests/programs/): a Llama-style block with -inf
masks, fused projections and RoPE buffers; nanoGPT's own model code; context-parallel
attention. Each correct program is equivalent; each bug is not equivalent, with a finding at
the program's own files."""
import json
import os
import subprocess

import pytest

from conftest import HERE, needs_torch

pytestmark = needs_torch
PROGRAMS = os.path.join(HERE, "programs")

# (program, mesh, bug or None, expected exit code, logical tensor a finding must name)
CASES = [
    ("llama_block", "dp=2,tp=2", None, 0, None),
    ("llama_block", "dp=2,tp=2", "no-backward-allreduce", 1, "grad:"),
    ("llama_block", "dp=2,tp=2", "allreduce-max", 1, "grad:"),
    ("llama_block", "dp=2,tp=2", "no-ddp-average", 1, "grad:"),
    ("nanogpt", "dp=2", None, 0, None),
    ("nanogpt", "dp=2", "double-average", 1, "grad:"),
    ("context_parallel", "cp=2", None, 0, None),
    ("context_parallel", "cp=2", "causal-offset", 1, "grad:"),
    ("context_parallel", "cp=2", "no-average", 1, "grad:"),
    ("torch_encoder", "dp=2", None, 0, None),
    ("torch_encoder", "dp=2", "sum-not-average", 1, "grad:"),
]


def capture(program, mesh, bug, tmp_path):
    from shardproof_torch.__main__ import main
    out = tmp_path / f"{program}-{bug or 'ok'}.json"
    old = os.environ.get("SHARDPROOF_EXAMPLE_BUG")
    os.environ["SHARDPROOF_EXAMPLE_BUG"] = bug or ""
    try:
        rc = main(["capture", os.path.join(PROGRAMS, program, "harness.py"), "--mesh", mesh,
                   "-o", str(out)])
    finally:
        if old is None:
            os.environ.pop("SHARDPROOF_EXAMPLE_BUG", None)
        else:
            os.environ["SHARDPROOF_EXAMPLE_BUG"] = old
    assert rc == 0
    return out


@pytest.mark.parametrize("program,mesh,bug,expected,tensor", CASES,
                         ids=[f"{c[0]}-{c[2] or 'ok'}" for c in CASES])
def test_program_verdict(program, mesh, bug, expected, tensor, tmp_path, shardproof_bin):
    plan = capture(program, mesh, bug, tmp_path)
    p = subprocess.run([shardproof_bin, "verify", "--no-daemon", "--no-cache", "--format",
                        "json", str(plan)], capture_output=True, text=True, timeout=600)
    assert p.returncode == expected, p.stdout[-3000:] + p.stderr[-2000:]
    report = json.loads(p.stdout)
    if expected == 0:
        assert report["verdict"] == "equivalent"
        return
    findings = report["findings"]
    assert findings and all(f["kind"] == "mismatch" for f in findings)
    assert any(f["tensor"].startswith(tensor) for f in findings)
    here = os.path.join("programs", program)
    places = [s.get("file", "") for f in findings for s in f.get("sources", [])]
    assert any(here in p for p in places), places
