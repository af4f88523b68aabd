"""Ranks that share a trace are lowered once and copied (rank_template.py): the copies must
be exactly the plan that lowering every rank on its own writes, names, ranks and lineage
included, on programs whose ranks differ in their blocks (fused QKV with a stride, vocab
ranges, ZeRO shards, pipeline peers)."""
import os

import pytest

from conftest import REPO, needs_torch

pytestmark = needs_torch
HERE = os.path.dirname(os.path.abspath(__file__))

CASES = [
    (os.path.join(REPO, "examples", "torch", "gpt", "harness.py"), {"dp": 4, "tp": 2}),
    (os.path.join(REPO, "examples", "torch", "mlp", "harness.py"), {"dp": 2, "tp": 2}),
    (os.path.join(HERE, "programs", "zero_tp", "harness.py"), {"dp": 2, "tp": 2}),
    (os.path.join(HERE, "programs", "pipeline", "harness.py"), None),
]


def plan_of(path, mesh, share):
    from shardproof_torch.driver import Capture
    cap = Capture(path, mesh, share_lowering=share)
    plan = cap.run()
    return plan, cap.stats


@pytest.mark.parametrize("path,mesh", CASES, ids=lambda c: os.path.basename(
    os.path.dirname(c)) if isinstance(c, str) else str(c))
def test_shared_lowering_writes_the_per_rank_plan(path, mesh):
    shared, stats = plan_of(path, mesh, True)
    alone, _ = plan_of(path, mesh, False)
    assert shared == alone
    world = shared["parallel"]["world"]
    if mesh is not None:  # the case is worth having only if ranks do share a trace
        assert stats["distinct_rank_programs"] < world


def test_a_copied_rank_has_its_own_names_rank_and_lineage():
    path = os.path.join(REPO, "examples", "torch", "gpt", "harness.py")
    plan, stats = plan_of(path, {"dp": 4, "tp": 2}, True)
    assert stats["distinct_rank_programs"] == 2  # tp 0 and tp 1; dp copies them
    t = plan["parallel"]["tensors"]
    ranks = {d["rank"] for n, d in t.items() if n.startswith("r7/")}
    assert ranks == {7}
    # rank 7 is dp 3, tp 1: its batch rows are the last quarter, its qkv rows tp 1's
    rows = t["r7/batch:ids"]["of"]["slice"][0]
    assert rows == [3 * rows[1] // 4, rows[1]]
    w = "blocks.0.attn.qkv.weight"
    assert t[f"r7/{w}#0"]["of"] == t[f"r1/{w}#0"]["of"] != t[f"r6/{w}#0"]["of"]
    for op in plan["parallel"]["ops"]:
        if op.get("rank") == 7:
            assert all(n.startswith("r7/") for n in op["in"] + op["out"]), op
