"""Probe programs written to the harness contract (tests/programs/): train_step variants
(gradient accumulation, loss scaling), a ZeRO-style sharded optimizer, hand-written
optimizers, gradient clipping, pipeline parallelism with send/recv, an expert-parallel
all-to-all, broadcast and new_group. Correct programs are equivalent (exit 0), each bug is
not equivalent (exit 1) with a finding at the user's source, contract violations are exit 2
at their line."""
import json
import os
import re

import pytest

from conftest import HAVE_TORCH, HERE, needs_torch
from harness_runs import bug_env, capture_harness, verify_plan

if HAVE_TORCH:
    import torch

pytestmark = needs_torch
PROGRAMS = os.path.join(HERE, "programs")


def capture(program, tmp_path, env=None, mesh=None):
    """(rc, stderr, plan path) of capturing programs/<program>/harness.py under env."""
    out = tmp_path / f"{program}-{abs(hash(tuple(sorted((env or {}).items()))))}.json"
    rc, err = capture_harness(os.path.join(PROGRAMS, program, "harness.py"), out, env, mesh)
    return rc, err, out


verify = verify_plan


# (program, env, bugs): the correct program (bug None) is equivalent, every bug is not
CASES = [
    ("grad_accum", {}, ["drop-micro", "double-micro", "no-unscale", "no-micro-divide"]),
    ("zero", {"SHARDPROOF_ZERO_OPT": "adamw"}, ["wrong-shard", "gather-order", "no-average"]),
    ("zero", {"SHARDPROOF_ZERO_OPT": "adam", "SHARDPROOF_ZERO_COMM": "all-reduce"},
     ["wrong-shard"]),
    ("zero", {"SHARDPROOF_ZERO_OPT": "sgd"}, ["gather-order"]),
    ("zero", {"SHARDPROOF_ZERO_OPT": "sgd-nesterov"}, []),
    ("zero", {"SHARDPROOF_ZERO_OPT": "adamw-foreach"}, []),
    ("zero_tp", {}, ["wrong-shard", "sum-not-avg"]),
    ("handopt", {"SHARDPROOF_HANDOPT": "adamw"}, ["grad-not-averaged",
                                                 "no-bias-correction-on-rank"]),
    ("handopt", {"SHARDPROOF_HANDOPT": "lerp"}, []),
    ("handopt", {"SHARDPROOF_HANDOPT": "sgd-momentum"}, ["grad-not-averaged"]),
    ("clip", {"SHARDPROOF_CLIP": "ddp"}, ["clip-before-average"]),
    ("clip", {"SHARDPROOF_CLIP": "ddp-inf"}, ["clip-before-average"]),
    ("clip", {"SHARDPROOF_CLIP": "tp"}, ["local-norm", "replicated-twice"]),
    ("pipeline", {}, ["swap-replica-grad", "ignore-recv-grad", "micro-order"]),
    ("pipeline", {"SHARDPROOF_PP_P2P": "batch"}, []),
    ("moe", {}, ["no-loss-divide", "combine-order", "no-backward-a2a"]),
    ("broadcast", {}, ["no-allreduce", "broadcast-grad"]),
]


def _id(run):
    prog, env, bug = run
    extra = ",".join(v for v in env.values())
    return f"{prog}[{extra}]-{bug or 'ok'}" if extra else f"{prog}-{bug or 'ok'}"


def _param(run):
    return pytest.param(run, id=_id(run))


RUNS = [_param((prog, env, bug)) for prog, env, bugs in CASES for bug in [None] + bugs]


@pytest.mark.parametrize("run", RUNS)
def test_program_verdict(run, tmp_path, shardproof_bin):
    prog, env, bug = run
    rc, err, plan = capture(prog, tmp_path, bug_env(bug, **env))
    assert rc == 0, err
    rc, report = verify(shardproof_bin, plan)
    if bug is None:
        assert (rc, report.get("verdict")) == (0, "equivalent"), report
        return
    assert (rc, report.get("verdict")) == (1, "not-equivalent"), report
    files = {os.path.basename(s["file"]) for f in report["findings"] for s in f.get("sources", [])}
    assert files & {"harness.py", "tplayers.py"}, report["findings"][:2]


# (env, rule, the line's text): exit 2 naming the harness's line
VIOLATIONS = [
    ("adam-twice", "optimizer-state", "adam.step()"),
    ("unmatched-recv", "collective-mismatch", "dist.recv(g, 0)"),
    ("unequal-split", "collective-split", "dist.all_to_all_single(out"),
    ("group-send", "collective-peer", "dist.send(model.fc1.weight.grad"),
    ("item-clip", "data-dependent", "norm.item()"),
]


@pytest.mark.parametrize("which,rule,text", VIOLATIONS)
def test_contract_violation_is_exit_2_at_its_line(which, rule, text, tmp_path):
    rc, err, plan = capture("violations", tmp_path, {"SHARDPROOF_VIOLATION": which})
    assert rc == 2, err
    assert "Traceback" not in err
    m = re.match(r"^(\S+):(\d+): \[([a-z-]+)\] ", err)
    assert m and m.group(3) == rule, err
    assert m.group(1).endswith(os.path.join("violations", "harness.py")), err
    lines = open(os.path.join(PROGRAMS, "violations", "harness.py")).read().splitlines()
    assert text in lines[int(m.group(2)) - 1], (err, lines[int(m.group(2)) - 1])
    assert not plan.exists()


def test_optimizers_built_in_train_step_are_captured_whole(tmp_path):
    for opt, op in (("adamw", "adam"), ("adam", "adam"), ("sgd", "sgd"),
                    ("sgd-nesterov", "sgd"), ("adamw-foreach", "adam")):
        rc, err, plan = capture("zero", tmp_path, {"SHARDPROOF_ZERO_OPT": opt})
        assert rc == 0, err
        p = json.loads(plan.read_text())
        ops = [o["op"] for o in p["parallel"]["ops"]]
        assert ops.count(op) == 2, (opt, ops)  # one shard parameter per rank
        assert "all_gather" in ops and "reduce_scatter" in ops


def test_train_step_gradients_are_claimed_only_where_the_step_is_final(tmp_path):
    # gradient accumulation steps the model's parameters: their gradients are claimed
    rc, err, plan = capture("grad_accum", tmp_path)
    assert rc == 0, err
    t = json.loads(plan.read_text())["parallel"]["tensors"]
    assert t["r3/grad:fc1.weight"]["of"]["tensor"] == "grad:fc1.weight"
    # ZeRO steps a shard and gathers it back: nothing to claim
    rc, err, plan = capture("zero", tmp_path)
    assert rc == 0, err
    assert not any("grad:" in k for k in json.loads(plan.read_text())["parallel"]["tensors"])


SHARD_OPTIMIZERS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    "adamw_foreach": lambda ps: torch.optim.AdamW(ps, lr=1e-2, foreach=True),
    "adam_l2_amsgrad": lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=0.1, amsgrad=True),
    "sgd_groups": lambda ps: torch.optim.SGD([{"params": ps, "lr": 0.3}], lr=0.1,
                                             momentum=0.9, nesterov=True),
}


@pytest.mark.parametrize("name", sorted(SHARD_OPTIMIZERS))
def test_optimizer_built_during_capture_matches_torch(name, eval_bin):
    """An optimizer built inside the traced program over a new nn.Parameter (a ZeRO shard)
    is captured whole, and its lowered step equals torch's real first step."""
    import numpy as np
    from fidelity import plan_of_trace, run_eval
    from shardproof_torch.tracer_torch1.capture import trace_function
    from shardproof_torch.tracer_torch1.optimizers import whole_steps
    make = SHARD_OPTIMIZERS[name]
    p0, g = torch.randn(3, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    real = torch.nn.Parameter(p0.clone())
    real.grad = g.clone()
    make([real]).step()

    def program(p, grad):
        # (a real-tensor trace makes an nn.Parameter built here a constant; the capture's
        # fake-mode trace follows it, as the zero programs show)
        shard = p.clone().requires_grad_()
        shard.grad = grad
        make([shard]).step()
        return shard.detach() * 1.0

    with whole_steps():
        trace = trace_function(program, [p0, g])
    assert any(n.op.startswith("shardproof.") and n.op.endswith("_step.default")
               for n in trace.nodes)
    got = run_eval(eval_bin, plan_of_trace(trace), {"in0": p0.tolist(), "in1": g.tolist()})
    np.testing.assert_allclose(np.array(got["out0"]), real.detach().numpy(), rtol=1e-9,
                               atol=1e-12)
