"""Reductions and matrix products."""
from .core import rule


def _dims(x, dims):
    if dims is None or dims == []:
        return list(range(len(x.shape)))
    return [dims] if isinstance(dims, int) else list(dims)


@rule("aten.sum.default", "aten.sum.dim_IntList")
def sum_(L, x, dims=None, keepdim=False, dtype=None):
    x = L.cast(x, L.out_meta().dtype)
    if not x.shape:
        return x
    return L.reduce("sum", x, _dims(x, dims), keepdim)


@rule("aten.mean.default", "aten.mean.dim")
def mean(L, x, dims=None, keepdim=False, dtype=None):
    if not x.shape:
        return x
    return L.reduce("mean", x, _dims(x, dims), keepdim)


@rule("aten.amax.default")
def amax(L, x, dims=None, keepdim=False):
    return L.reduce("max", x, _dims(x, dims), keepdim)


@rule("aten.max.default")
def max_all(L, x):
    return L.reduce("max", x, _dims(x, None), False)


@rule("aten.max.dim")
def max_dim(L, x, dim, keepdim=False):
    values = L.reduce("max", x, [dim], keepdim)
    return [values, _Unavailable(L, "the indices of max(dim)")]


class _Unavailable:
    """An output no rule computes: an error only if something uses it."""

    def __init__(self, L, what):
        self.error = L.unsupported(f"{what} (argmax) are not supported")


@rule("aten.mm.default", "aten.bmm.default")
def mm(L, a, b):
    out = L.out_meta()
    return L.emit("matmul", [a, b], out.shape, out.dtype)


@rule("aten.addmm.default")
def addmm(L, bias, a, b, beta=1, alpha=1):
    out = L.out_meta()
    prod = L.scale(L.emit("matmul", [a, b], out.shape, out.dtype), alpha)
    if beta == 0:
        return prod
    return L.binary("add", prod, L.scale(bias, beta))


@rule("aten.baddbmm.default")
def baddbmm(L, x, a, b, beta=1, alpha=1):
    return addmm(L, x, a, b, beta, alpha)


@rule("aten.dot.default")
def dot(L, a, b):
    prod = L.binary("mul", a, b, shape=a.shape)
    return L.reduce("sum", prod, [0], False)
