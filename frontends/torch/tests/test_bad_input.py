"""Harnesses that break the contract, and programs that cannot be captured: exit 2 with
`file:line: [rule] text`, never a traceback."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import FRONTEND, HERE, needs_torch

HARNESSES = os.path.join(HERE, "harnesses")

# harness -> (rule, line the message must name)
CASES = {
    "missing_mesh.py": ("harness-missing", 1),
    "missing_build_logical.py": ("harness-missing", 1),
    "layout_missing_key.py": ("batch-layout", 4),
    "param_name_mismatch.py": ("param-name", 16),
    "unknown_op.py": ("unsupported-op", 9),
    "collective_bypass.py": ("collective-bypass", 7),
    "dropout.py": ("random", 8),
    "item_control_flow.py": ("data-dependent", 9),
    "bool_control_flow.py": ("data-dependent", 9),
    "skipped_allreduce.py": ("collective-mismatch", 11),
    "differing_sizes.py": ("collective-mismatch", 10),
    "syntax_error.py": ("harness-syntax", 1),
    "neg_inf_summed.py": ("infinity", 9),
    "one_hot_without_classes.py": ("data-dependent", 9),
    "ddp_wrapper.py": ("collective-bypass", 8),
    "neg_inf_subtracted.py": ("infinity", 9),
    "stale_group.py": ("collective-group", 14),
    "tensor_lr.py": ("optimizer", 5),
    "optimizer_none.py": ("harness-type", 4),
    "reduce_product.py": ("collective-op", 8),
    "hook_unsupported.py": ("collective-unsupported", 10),
    "init_process_group.py": ("harness-contract", 9),
    "ctx_written.py": ("harness-contract", 9),
    "untracked_attribute.py": ("untracked-tensor", 13),
    "adagrad.py": ("untracked-tensor", 6),
    "layout_unknown_axis.py": ("param-layout", 5),
    "param_replaced.py": ("param-replaced", 8),
}


def capture(harness, tmp_path, capsys, *extra):
    from shardproof_torch.__main__ import main
    rc = main(["capture", os.path.join(HARNESSES, harness), "-o", str(tmp_path / "p.json"),
               *extra])
    return rc, capsys.readouterr().err


@needs_torch
@pytest.mark.parametrize("harness", sorted(CASES))
def test_bad_harness_is_exit_2_at_its_line(harness, tmp_path, capsys):
    rule, line = CASES[harness]
    rc, err = capture(harness, tmp_path, capsys)
    assert rc == 2, err
    assert "Traceback" not in err
    m = re.match(r"^(\S+):(\d+): \[([a-z-]+)\] ", err)
    assert m, err
    assert m.group(1).endswith(harness), err
    assert (int(m.group(2)), m.group(3)) == (line, rule), err
    assert not (tmp_path / "p.json").exists()


@needs_torch
def test_the_base_harness_captures(tmp_path, capsys):
    rc, err = capture("base.py", tmp_path, capsys)
    assert rc == 0, err
    assert (tmp_path / "p.json").exists()


@needs_torch
def test_mismatch_names_both_lines(tmp_path, capsys):
    rc, err = capture("differing_sizes.py", tmp_path, capsys)
    assert rc == 2
    assert err.count("differing_sizes.py:10") >= 2 and "[4, 4]" in err and "[2, 4]" in err


def test_bad_mesh_option_is_exit_2(tmp_path, capsys):
    from shardproof_torch.__main__ import main
    rc = main(["capture", os.path.join(HARNESSES, "base.py"), "--mesh", "dp=zero"])
    assert rc == 2
    assert "[mesh]" in capsys.readouterr().err


@needs_torch
def test_a_mesh_axis_the_harness_never_names_is_exit_2(tmp_path, capsys):
    # a typo (tpp for tp) would verify a mesh that replicates every rank without a word
    rc, err = capture("base.py", tmp_path, capsys, "--mesh", "dp=2,tpp=2")
    assert rc == 2, err
    assert re.match(r"^\S+base\.py:7: \[harness-mesh\] --mesh adds the axis 'tpp'", err), err
    # an axis the harness names (pipeline/harness.py's ctx.groups["pp"]) may be added, and
    # tp, which Megatron's attributes split along, always
    rc, err = capture("base.py", tmp_path, capsys, "--mesh", "dp=2,tp=2")
    assert rc == 0, err


def test_unknown_emit_feature_is_exit_2(tmp_path, capsys):
    from shardproof_torch.__main__ import main
    rc = main(["capture", os.path.join(HARNESSES, "base.py"), "--emit", "colour"])
    assert rc == 2
    assert "[usage]" in capsys.readouterr().err


def _python_without_torch():
    for candidate in (shutil.which("python3"), "/usr/local/bin/python3"):
        if candidate and os.path.exists(candidate):
            p = subprocess.run([candidate, "-c", "import torch"], capture_output=True)
            if p.returncode != 0:
                return candidate
    return None


def test_missing_torch_is_exit_2_at_the_import():
    py = _python_without_torch()
    if py is None:
        pytest.skip("every python3 on this machine has torch: cannot test its absence")
    env = dict(os.environ, PYTHONPATH=FRONTEND)
    p = subprocess.run([py, "-m", "shardproof_torch", "capture",
                        os.path.join(HARNESSES, "no_torch.py")], capture_output=True, text=True,
                       env=env, timeout=60)
    assert p.returncode == 2, p.stderr
    assert re.match(r"^\S*no_torch\.py:2: \[torch-missing\] ", p.stderr), p.stderr


@needs_torch
def test_an_unsupported_reduce_op_is_named(tmp_path, capsys):
    rc, err = capture("reduce_product.py", tmp_path, capsys)
    assert rc == 2 and "reduce op PRODUCT is not supported" in err, err


@needs_torch
def test_another_torch_line_is_exit_2_naming_the_version(monkeypatch):
    # the tracer is torch 1.13's; a torch 2.x (Ubuntu's, pip's) must say so, not trace
    import torch
    from shardproof_torch import driver
    from shardproof_torch.errors import CaptureError
    monkeypatch.setattr(torch, "__version__", "2.1.2")
    with pytest.raises(CaptureError) as e:
        driver._tracer()
    assert e.value.rule == "torch-version" and "2.1.2" in str(e.value)
