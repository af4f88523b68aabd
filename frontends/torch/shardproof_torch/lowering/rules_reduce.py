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


# ---- minimum, variance, log-sum-exp, running sums

def _neg(L, x):
    return L.unary("neg", x)


@rule("aten.amin.default")
def amin(L, x, dims=None, keepdim=False):
    return _neg(L, L.reduce("max", _neg(L, x), _dims(x, dims), keepdim))


@rule("aten.min.default")
def min_all(L, x):
    return amin(L, x)


@rule("aten.min.dim")
def min_dim(L, x, dim, keepdim=False):
    return [amin(L, x, [dim], keepdim), _Unavailable(L, "the indices of min(dim)")]


def _correction(correction=None):
    return 1 if correction is None else correction


def _variance(L, x, dims, keepdim, corr):
    """sum((x - mean)^2) / (n - correction) over dims."""
    dims = _dims(x, dims)
    n = 1
    for d in dims:
        n *= x.shape[d % len(x.shape)]
    if n - corr <= 0:
        raise L.unsupported(f"variance of {n} element(s) with correction {corr} divides by "
                            "zero (NaN in torch)")
    mean = L.reduce("mean", x, dims, True)
    xc = L.binary("sub", x, mean, x.dtype, x.shape)
    sq = L.reduce("sum", L.binary("mul", xc, xc, x.dtype, x.shape), dims, keepdim)
    from fractions import Fraction
    return L.scale(sq, Fraction(1, n - corr)), mean


# (torch turns var(unbiased=...), std(...) and their dim forms into the .correction ones)
@rule("aten.var.correction")
def var(L, x, dims=None, correction=None, keepdim=False):
    return _variance(L, x, dims, keepdim, _correction(correction))[0]


@rule("aten.std.correction")
def std(L, x, dims=None, correction=None, keepdim=False):
    return L.unary("sqrt", var(L, x, dims, correction, keepdim))


@rule("aten.var_mean.correction", "aten.std_mean.correction")
def var_mean(L, x, dims=None, correction=None, keepdim=False):
    v, mean = _variance(L, x, dims, keepdim, _correction(correction))
    if "std_mean" in L.node.op:
        v = L.unary("sqrt", v)
    if not keepdim:
        mean = L.reshape(mean, v.shape)
    return [v, mean]


@rule("aten.logsumexp.default")
def logsumexp(L, x, dims, keepdim=False):
    """m + log(sum(exp(x - m))), m the max over dims (any finite shift is exact)."""
    dims = _dims(x, dims)
    m = L.reduce("max", x, dims, True)
    e = L.unary("exp", L.binary("sub", x, m, x.dtype, x.shape))
    out = L.binary("add", L.unary("log", L.reduce("sum", e, dims, True)), m, x.dtype, m.shape)
    return out if keepdim else L.reshape(out, L.out_meta().shape)


@rule("aten.cumsum.default")
def cumsum(L, x, dim, dtype=None):
    """A running sum is a product with a triangular matrix of ones: exact."""
    out = L.out_meta()
    x = L.cast(x, out.dtype)
    dim %= len(x.shape)
    n = x.shape[dim]
    upper = L.binary("le", L.iota([n, 1], 0), L.iota([1, n], 1), "bool", [n, n])
    tri = L.cast(upper, out.dtype)  # tri[i, j] = 1 where i <= j
    last = len(x.shape) - 1
    perm = list(range(len(x.shape)))
    perm[dim], perm[last] = perm[last], perm[dim]
    xt = x if dim == last else L.emit("transpose", [x], [x.shape[p] for p in perm], x.dtype,
                                      {"perm": perm})
    summed = L.emit("matmul", [xt, tri], xt.shape, out.dtype)
    if dim == last:
        return summed
    return L.emit("transpose", [summed], out.shape, out.dtype, {"perm": perm})


@rule("aten.mv.default")
def mv(L, a, v):
    col = L.reshape(v, [v.shape[0], 1])
    prod = L.emit("matmul", [a, col], [a.shape[0], 1], L.out_meta().dtype)
    return L.reshape(prod, [a.shape[0]])


@rule("aten.any.default", "aten.any.dim", "aten.all.default", "aten.all.dim")
def any_all(L, x, dim=None, keepdim=False):
    """any: the max of 0/1; all: not any of the negation."""
    out = L.out_meta()
    b = L.cast(x, "bool")
    is_all = ".all." in L.node.op
    if is_all:
        b = L.binary("eq", b, L.tensor(False, "bool"), "bool", b.shape)
    flags = L.cast(b, "i64")
    dims = _dims(x, dim)
    hit = L.reduce("max", flags, dims, keepdim) if x.shape else flags
    got = L.binary("eq", hit, 1 if not is_all else 0, "bool", hit.shape)
    return L.reshape(got, out.shape)
