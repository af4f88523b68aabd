"""torch.distributed is invisible to autograd (its kernels write tensor memory), and so is the
capture's stand-in: the write-back of a collective is not recorded by autograd. Checked here
on eager tensors against what torch.distributed does, and end to end by
programs/inplace_collectives (test_programs_models.py), whose gradients agree with the
single-device ones under real gloo collectives: a row-parallel sum all-reduced in place in
forward, a gradient all-reduced in place in a tensor hook."""
import pytest

torch = pytest.importorskip("torch")
from shardproof_torch.tracer_torch1.fake_dist import _write_back  # noqa: E402


def test_in_place_collective_keeps_the_autograd_history():
    x = torch.randn(3, requires_grad=True)
    y = x * 2
    fn = y.grad_fn
    _write_back(y, torch.ones(3))  # dist.all_reduce(y): y's memory now holds the sum
    assert y.grad_fn is fn
    (y * 3).sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 6.0))  # the collective passed as the identity


def test_output_buffer_gets_no_history_from_the_input():
    x = torch.randn(3, requires_grad=True)
    out = torch.empty(3)
    _write_back(out, x * 2)  # dist.all_gather_into_tensor(out, x * 2)
    assert not out.requires_grad and out.grad_fn is None


def test_leaf_parameter_written_in_place():
    p = torch.nn.Parameter(torch.zeros(3))
    _write_back(p, torch.ones(3))  # dist.broadcast(p, src) outside no_grad
    assert p.is_leaf and p.requires_grad and torch.equal(p.detach(), torch.ones(3))
