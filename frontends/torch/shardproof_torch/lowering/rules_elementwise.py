"""Elementwise arithmetic, activations and their backward ops. Activations the engine
treats as uninterpreted functions stay one op (`gelu`, `silu`, ...); their derivatives are
`map` functions named `<op>_grad` (so every proof holds for any activation and its
derivative), and `shardproof eval --real-functions` gives those names their real meaning."""
import math

from .core import V, broadcast, dclass, rule


def _scalar(x):
    return not isinstance(x, V)


@rule("aten.add.Tensor", "aten.add.Scalar")
def add(L, a, b, alpha=1):
    if alpha != 1:
        b = L.scale(b, alpha) if isinstance(b, V) else b * alpha
    if _scalar(b) and b == 0 and isinstance(a, V) and a.shape == L.out_meta().shape:
        return L.cast(a, L.out_meta().dtype)
    return L.binary("add", a, b)


@rule("aten.sub.Tensor", "aten.sub.Scalar")
def sub(L, a, b, alpha=1):
    if alpha != 1:
        b = L.scale(b, alpha) if isinstance(b, V) else b * alpha
    return L.binary("sub", a, b)


@rule("aten.rsub.Scalar", "aten.rsub.Tensor")
def rsub(L, a, b, alpha=1):
    if alpha != 1:
        a = L.scale(a, alpha)
    return L.binary("sub", b, a)


@rule("aten.mul.Tensor", "aten.mul.Scalar")
def mul(L, a, b):
    out = L.out_meta()
    if _scalar(a):
        a, b = b, a
    if _scalar(b) and (dclass(out.dtype) == "real" or float(b).is_integer()):
        return L.scale(L.cast(a, out.dtype), b if dclass(out.dtype) == "real" else int(b))
    if dclass(out.dtype) == "bool":
        return L.emit("where", [a, L.cast(L.tensor(b, "bool"), "bool"), L.tensor(False, "bool")],
                      out.shape, "bool")
    return L.binary("mul", a, b)


@rule("aten.div.Tensor", "aten.div.Scalar")
def div(L, a, b):
    out = L.out_meta()
    if _scalar(b):
        if b == 0:
            raise L.error("division-by-zero", "division by the constant 0")
        from fractions import Fraction
        from .numbers import as_fraction, exact
        return L.scale(L.cast(a, out.dtype), 1 / as_fraction(exact(b)))
    return L.binary("div", a, b)


@rule("aten.div.Tensor_mode")
def div_mode(L, a, b, rounding_mode=None):
    if rounding_mode is None:
        return div(L, a, b)
    raise L.unsupported(f"division with rounding_mode={rounding_mode!r}")


UNARY = {"aten.neg.default": "neg", "aten.exp.default": "exp", "aten.log.default": "log",
         "aten.sqrt.default": "sqrt", "aten.rsqrt.default": "rsqrt", "aten.tanh.default": "tanh",
         "aten.sigmoid.default": "sigmoid", "aten.relu.default": "relu",
         "aten.erf.default": "erf", "aten.reciprocal.default": "reciprocal",
         "aten.silu.default": "silu", "aten.square.default": "square"}


@rule(*UNARY)
def unary(L, x):
    return L.unary(UNARY[L.node.op], L.cast(x, L.out_meta().dtype))


@rule("aten.gelu.default")
def gelu(L, x, approximate="none"):
    if approximate == "none":
        return L.unary("gelu", x)
    # tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    cube = L.emit("pow", [x], x.shape, x.dtype, {"exponent": 3})
    inner = L.binary("add", x, L.scale(cube, 0.044715), x.dtype, x.shape)
    th = L.unary("tanh", L.scale(inner, math.sqrt(2 / math.pi)))
    one_plus = L.binary("add", th, 1.0, x.dtype, x.shape)
    return L.scale(L.binary("mul", x, one_plus, x.dtype, x.shape), 0.5)


@rule("aten.pow.Tensor_Scalar")
def pow_(L, x, e):
    x = L.cast(x, L.out_meta().dtype)
    if float(e) == 0.5:
        return L.unary("sqrt", x)
    if float(e) == -0.5:
        return L.unary("rsqrt", x)
    if float(e).is_integer() and abs(e) <= 64:
        e = int(e)
        if e == 1:
            return x
        p = L.emit("pow", [x], x.shape, x.dtype, {"exponent": abs(e)}) if e != -1 else x
        return p if e >= 0 else L.unary("reciprocal", p)
    from .rules_activations import map_fn
    return map_fn(L, "pow", x, e)  # a real exponent: pow as a function of two values


@rule("aten.maximum.default", "aten.minimum.default")
def max_min(L, a, b):
    return L.binary("maximum" if "maximum" in L.node.op else "minimum", a, b)


@rule("aten.clamp_min.default")
def clamp_min(L, x, v):
    return L.binary("maximum", x, v)


@rule("aten.clamp_max.default")
def clamp_max(L, x, v):
    return L.binary("minimum", x, v)


@rule("aten.clamp.default")
def clamp(L, x, lo=None, hi=None):
    if lo is not None:
        x = L.binary("maximum", x, lo)
    if hi is not None:
        x = L.binary("minimum", x, hi)
    return x


@rule("aten.abs.default")
def abs_(L, x):
    return L.binary("maximum", x, L.unary("neg", x))


COMPARE = {"eq": "eq", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


@rule(*[f"aten.{c}.{k}" for c in COMPARE for k in ("Tensor", "Scalar")])
def compare(L, a, b):
    op = L.node.op.split(".")[1]
    return L.binary(op, a, b, "bool")


@rule("aten.ne.Tensor", "aten.ne.Scalar")
def ne(L, a, b):
    e = L.binary("eq", a, b, "bool")
    return L.binary("eq", e, L.tensor(False, "bool"), "bool", e.shape)


@rule("aten.logical_not.default", "aten.bitwise_not.default")
def logical_not(L, x):
    if x.dtype != "bool":
        x = L.binary("eq", x, 0, "bool", x.shape) if L.node.op.startswith("aten.logical") \
            else None
        if x is None:
            raise L.unsupported("bitwise_not on integers")
        return x
    return L.binary("eq", x, L.tensor(False, "bool"), "bool", x.shape)


@rule("aten.logical_and.default", "aten.bitwise_and.Tensor")
def logical_and(L, a, b):
    a, b = L.cast(a, "bool"), L.cast(b, "bool")
    shape = broadcast(a, b)
    return L.emit("where", [a, b, L.tensor(False, "bool")], shape, "bool")


@rule("aten.logical_or.default", "aten.bitwise_or.Tensor")
def logical_or(L, a, b):
    a, b = L.cast(a, "bool"), L.cast(b, "bool")
    shape = broadcast(a, b)
    return L.emit("where", [a, L.tensor(True, "bool"), b], shape, "bool")


@rule("aten.where.self", "aten.where.ScalarOther")
def where(L, c, a, b):
    out = L.out_meta()
    a = L.cast(L.tensor(a, out.dtype), out.dtype)
    b = L.cast(L.tensor(b, out.dtype), out.dtype)
    return L.emit("where", [L.cast(c, "bool"), a, b], out.shape, out.dtype)


@rule("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def masked_fill(L, x, mask, value):
    out = L.out_meta()
    v = L.cast(L.tensor(value, out.dtype), out.dtype)
    return L.emit("where", [mask, v, x], out.shape, out.dtype)


# ---- backward of activations

def _grad_map(L, fn, grad, x):
    d = L.emit("map", [x], x.shape, x.dtype, {"fn": fn}, base=fn)
    return L.binary("mul", grad, d)


@rule("aten.gelu_backward.default")
def gelu_backward(L, grad, x, approximate="none"):
    return _grad_map(L, "gelu_grad" if approximate == "none" else "gelu_tanh_grad", grad, x)


@rule("aten.silu_backward.default")
def silu_backward(L, grad, x):
    return _grad_map(L, "silu_grad", grad, x)


@rule("aten.threshold_backward.default")
def threshold_backward(L, grad, x, threshold):
    out = L.out_meta()
    keep = L.binary("gt", x, threshold, "bool")
    return L.emit("where", [keep, grad, L.tensor(0, out.dtype)], out.shape, out.dtype)


@rule("aten.tanh_backward.default")
def tanh_backward(L, grad, y):
    sq = L.binary("mul", y, y)
    return L.binary("mul", grad, L.binary("sub", 1.0, sq))


@rule("aten.sigmoid_backward.default")
def sigmoid_backward(L, grad, y):
    one_minus = L.binary("sub", 1.0, y)
    return L.binary("mul", grad, L.binary("mul", y, one_minus))
