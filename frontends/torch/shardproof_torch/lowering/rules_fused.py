"""Fused arithmetic of optimizers and gradient clipping: zero (zero_grad), addcmul, addcdiv,
lerp (hand-written Adam-style updates), and vector norms (torch.norm, torch.linalg.vector_norm, as
clip_grad_norm_ computes them).

A 2-norm is `sqrt(sum(x*x))`, and the rule remembers the sum of squares (`L.facts`): the
2-norm of a stack of 2-norms (clip_grad_norm_'s total norm) is then written as the sqrt of
the sum of their sums of squares, the same expression a hand-written global norm gives
(`sqrt(sum of (g*g).sum())`). `sqrt` is uninterpreted in the engine, so without this the
two equal norms would be different expressions."""
import math

from .core import V, rule
from .numbers import as_fraction, exact


@rule("aten.zero.default")
def zero(L, x):
    # t.zero_() (optimizer.zero_grad(set_to_none=False) on an existing gradient): reads only
    # the shape (core.SHAPE_ONLY)
    out = L.out_meta()
    return L.const(0, out.shape, out.dtype)


@rule("aten.addcmul.default")
def addcmul(L, x, t1, t2, value=1):
    out = L.out_meta()
    prod = L.binary("mul", t1, t2, out.dtype, out.shape)
    return L.binary("add", x, L.scale(prod, value), out.dtype, out.shape)


@rule("aten.addcdiv.default")
def addcdiv(L, x, t1, t2, value=1):
    out = L.out_meta()
    quot = L.binary("div", t1, t2, out.dtype, out.shape)
    return L.binary("add", x, L.scale(quot, value), out.dtype, out.shape)


@rule("aten.lerp.Scalar", "aten.lerp.Tensor")
def lerp(L, x, end, weight):
    # x + w * (end - x) (torch switches to end - (1 - w) * (end - x) for w >= 0.5: the same
    # real number). A number w: (1 - w) * x + w * end, Adam's own `b1 * m + (1 - b1) * g`.
    out = L.out_meta()
    if not isinstance(weight, V):
        w = as_fraction(exact(weight))
        return L.binary("add", L.scale(L.cast(L.tensor(x, out.dtype), out.dtype), 1 - w),
                        L.scale(L.cast(L.tensor(end, out.dtype), out.dtype), w), out.dtype,
                        out.shape)
    diff = L.binary("sub", end, x, out.dtype, out.shape)
    return L.binary("add", x, L.binary("mul", weight, diff, out.dtype, out.shape), out.dtype,
                    out.shape)


def _dims(x, dim):
    if dim is None or dim == []:
        return list(range(len(x.shape)))
    return [dim] if isinstance(dim, int) else list(dim)


def _stacked_sumsq(L, dims, x):
    """The sums of squares behind a stack (or cat) of scalar 2-norms, if x is one."""
    ref = L.node.args[0]
    node = L.trace.nodes[ref.node] if hasattr(ref, "node") else None
    if node is None or node.op not in ("aten.stack.default", "aten.cat.default") or \
            len(dims) != len(x.shape):
        return None
    parts = [L.env.get(r) for r in node.args[0]] if isinstance(node.args[0], list) else []
    facts = [L.facts.get(p.name, {}).get("sumsq") if isinstance(p, V) else None
             for p in parts]
    if not facts or any(f is None or f.shape not in ([], [1]) for f in facts):
        return None
    return facts


def _norm(L, x, p, dim, keepdim):
    out = L.out_meta()
    x = L.cast(x, out.dtype)
    dims = _dims(x, dim)
    p = 2.0 if p is None else float(p)
    if p == 2.0:
        parts = _stacked_sumsq(L, dims, x)
        if parts is not None:
            sumsq = L.reshape(parts[0], [])
            for f in parts[1:]:
                sumsq = L.binary("add", sumsq, L.reshape(f, []), out.dtype, [])
            sumsq = L.reshape(sumsq, out.shape)
        else:
            sq = L.binary("mul", x, x, out.dtype, x.shape)
            sumsq = L.reduce("sum", sq, dims, keepdim)
        norm = L.unary("sqrt", sumsq)
        L.facts.setdefault(norm.name, {})["sumsq"] = sumsq
        return norm
    absx = L.binary("maximum", x, L.unary("neg", x), out.dtype, x.shape)
    if p == 1.0:
        return L.reduce("sum", absx, dims, keepdim)
    if math.isinf(p) and p > 0:
        return L.reduce("max", absx, dims, keepdim)
    raise L.unsupported(f"a vector norm of order {p} (2, 1 and inf are supported)")


@rule("aten.norm.Scalar", "aten.norm.ScalarOpt_dim", "aten.norm.ScalarOpt_dim_dtype",
      "aten.norm.ScalarOpt_dtype")
def norm(L, x, p=2.0, dim=None, keepdim=False, dtype=None):
    if L.node.op == "aten.norm.ScalarOpt_dtype":  # norm(x, p, *, dtype)
        dim, keepdim = None, False
    return _norm(L, x, p, dim, keepdim)


@rule("aten.linalg_vector_norm.default")
def linalg_vector_norm(L, x, ord=2.0, dim=None, keepdim=False, dtype=None):
    return _norm(L, x, ord, dim, keepdim)
