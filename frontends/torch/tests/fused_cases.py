"""Fidelity cases of lowering/rules_fused.py (addcmul, addcdiv, lerp, vector norms, gradient
clipping, a hand-written AdamW) and of the whole-step gradient mark; test_fidelity.py runs
them with its own (CASES: traced functions; SINGLE_OPS: one hand-written ATen node)."""
import math

import torch

D = torch.float64
A = torch.ops.aten


def r(*shape):
    return torch.randn(*shape, dtype=D)


def pos(*shape):
    return torch.rand(*shape, dtype=D) + 0.5


def _clip(a, b):
    """clip_grad_norm_'s arithmetic on two gradients (torch 1.13), returning them clipped."""
    total = torch.norm(torch.stack([torch.norm(a, 2.0), torch.norm(b, 2.0)]), 2.0)
    coef = torch.clamp(0.5 / (total + 1e-6), max=1.0)
    return total, a * coef, b * coef


def _handwritten_global_norm(a, b):
    return torch.sqrt((a * a).sum() + b.pow(2).sum())


def _adamw(p, g):
    """A user's AdamW, first step from zero state, in place."""
    lr, b1, b2, eps, wd = 1e-2, 0.9, 0.95, 1e-8, 0.1
    p = p.clone()
    m, v = torch.zeros_like(p), torch.zeros_like(p)
    m.lerp_(g, 1 - b1)
    v.mul_(b2).addcmul_(g, g, value=1 - b2)
    denom = (v.sqrt() / math.sqrt(1 - b2)).add_(eps)
    p.mul_(1 - lr * wd)
    p.addcdiv_(m, denom, value=-lr / (1 - b1))
    return p


def _mark_step_grad(x):
    from shardproof_torch.tracer_torch1.library import ops
    return ops().mark_step_grad(x, 0) * 1.0


CASES = {
    "fused_addcmul_addcdiv": (lambda a, b, c: (torch.addcmul(a, b, c, value=0.3),
                                               a.addcdiv(b, c, value=-0.2),
                                               a.clone().addcmul_(b, c).addcdiv_(b, c)),
                              lambda: [r(3, 4), r(3, 4), pos(3, 4)]),
    "fused_lerp": (lambda a, b, w: (torch.lerp(a, b, 0.3), torch.lerp(a, b, 0.7),
                                    torch.lerp(a, b, w), a.clone().lerp_(b, 0.1)),
                   lambda: [r(3, 4), r(3, 4), r(3, 4)]),
    "fused_norms": (lambda x: (torch.norm(x), torch.norm(x, 2.0, dim=1),
                               torch.norm(x, dim=0, keepdim=True),
                               torch.linalg.vector_norm(x, ord=1),
                               torch.linalg.vector_norm(x, float("inf"), dim=1),
                               x.norm(p=1, dim=(0, 1))),
                    lambda: [r(3, 4)]),
    "fused_clip_grad_norm": (_clip, lambda: [r(3, 4), r(5)]),
    "fused_global_norm_handwritten": (_handwritten_global_norm, lambda: [r(3, 4), r(5)]),
    "fused_handwritten_adamw": (_adamw, lambda: [r(3, 4), r(3, 4)]),
    "mark_step_grad": (_mark_step_grad, lambda: [r(3)]),
    "fused_zero": (lambda x: (x * 2).zero_() + x, lambda: [r(3)]),
}

SINGLE_OPS = {
    "aten.norm.Scalar": (lambda: [r(3, 4)], [2.0], A.norm.Scalar),
    "aten.norm.ScalarOpt_dim_dtype": (lambda: [r(3, 4)], [2.0, [1], True],
                                      lambda x, p, d, k: A.norm.ScalarOpt_dim_dtype(
                                          x, p, d, k, dtype=D)),
    "aten.norm.ScalarOpt_dtype": (lambda: [r(3, 4)], [1.0],
                                  lambda x, p: A.norm.ScalarOpt_dtype(x, p, dtype=D)),
}
