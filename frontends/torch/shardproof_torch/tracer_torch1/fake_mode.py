"""The FakeTensorMode capture runs in, with what torch 1.13's lacks for user programs:

- A real tensor made outside the mode (a module-level constant, `SCALE = torch.tensor([...])`
  at import, or a table built before capture) may meet fake tensors: it is converted to a fake
  tensor on the way in (torch 2.x's `allow_non_fake_inputs`). make_fx, above this mode, has
  already recorded it as a constant of the graph (`get_attr`), so the plan holds its values.
- Ops with a lowering rule but no meta kernel in torch 1.13 (`smooth_l1_loss_backward`,
  `huber_loss_backward`, `nll_loss2d_forward`: `F.smooth_l1_loss`, `F.huber_loss`,
  `F.cross_entropy` on `[N, C, d]`) get their output shapes here, so the fidelity-tested
  rules are reachable from a captured program."""
import torch
from torch._subclasses import fake_tensor as fake_mod
from torch.utils._pytree import tree_flatten, tree_unflatten

aten = torch.ops.aten


def _plain(x):
    return type(x) in (torch.Tensor, torch.nn.Parameter)


class CaptureFakeMode(fake_mod.FakeTensorMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        flat, spec = tree_flatten((args, kwargs or {}))
        # (a lift is torch.tensor(...) inside the mode: the mode makes its constant itself)
        if func not in self.lift_fns and any(_plain(x) for x in flat):
            flat = [self.from_tensor(x) if _plain(x) else x for x in flat]
            args, kwargs = tree_unflatten(flat, spec)
            types = tuple(t for t in types if t not in (torch.Tensor, torch.nn.Parameter)) or \
                (fake_mod.FakeTensor,)
        return super().__torch_dispatch__(func, types, args, kwargs)


def make():
    return CaptureFakeMode(allow_fallback_kernels=False)


def _empty_like_fake(fake_mode, shape, like):
    meta = torch.empty(shape, dtype=like.dtype, device="meta")
    return fake_mod.FakeTensor(fake_mode, meta, like.device)


def _loss_backward_like_input(fake_mode, func, grad_output, x, *args, **kwargs):
    return _empty_like_fake(fake_mode, x.shape, x)


def _nll_loss2d_forward(fake_mode, func, x, target, weight, reduction, ignore_index):
    shape = target.shape if reduction == 0 else ()
    return (_empty_like_fake(fake_mode, shape, x), _empty_like_fake(fake_mode, (), x))


_REGISTERED = []


def register_kernels():
    """Once per process; only where torch 1.13 has no meta kernel of its own."""
    if _REGISTERED:
        return
    _REGISTERED.append(True)
    for op, impl in ((aten.smooth_l1_loss_backward.default, _loss_backward_like_input),
                     (aten.huber_loss_backward.default, _loss_backward_like_input),
                     (aten.nll_loss2d_forward.default, _nll_loss2d_forward)):
        fake_mod.register_op_impl(op)(impl)
