"""More activations and pointwise functions, forward and backward: sign, leaky_relu, elu,
hardtanh (relu6), softplus, mish, logsigmoid, glu, log1p/expm1, and the transcendental
functions the plan has no operator for (cos, sin, pow with a real exponent), written as
`map` functions: uninterpreted in the proof, the same function in both graphs."""
from fractions import Fraction

from .core import rule


def _real(L, x):
    return L.cast(x, L.out_meta().dtype)


def _where(L, c, a, b):
    out = L.out_meta()
    a = L.cast(L.tensor(a, out.dtype), out.dtype)
    b = L.cast(L.tensor(b, out.dtype), out.dtype)
    return L.emit("where", [c, a, b], out.shape, out.dtype)


def map_fn(L, fn, *xs):
    """fn(*xs) as an uninterpreted function, elementwise with broadcasting."""
    from .core import broadcast
    out = L.out_meta()
    xs = [L.cast(L.tensor(x, out.dtype), out.dtype) for x in xs]
    return L.emit("map", xs, broadcast(*xs), out.dtype, {"fn": fn}, base=fn)


@rule("aten.sign.default", "aten.sgn.default")
def sign(L, x):
    out = L.out_meta()
    pos = L.binary("gt", x, 0, "bool", x.shape)
    neg = L.binary("lt", x, 0, "bool", x.shape)
    inner = L.emit("where", [neg, L.tensor(-1, out.dtype), L.tensor(0, out.dtype)], x.shape,
                   out.dtype)
    return L.emit("where", [pos, L.tensor(1, out.dtype), inner], x.shape, out.dtype)


@rule("aten.leaky_relu.default")
def leaky_relu(L, x, negative_slope=0.01):
    x = _real(L, x)
    keep = L.binary("gt", x, 0, "bool", x.shape)
    return _where(L, keep, x, L.scale(x, negative_slope))


@rule("aten.leaky_relu_backward.default")
def leaky_relu_backward(L, grad, x, negative_slope, self_is_result):
    keep = L.binary("gt", x, 0, "bool", x.shape)
    return _where(L, keep, grad, L.scale(grad, negative_slope))


@rule("aten.elu.default")
def elu(L, x, alpha=1, scale=1, input_scale=1):
    """scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1))."""
    x = _real(L, x)
    keep = L.binary("gt", x, 0, "bool", x.shape)
    em1 = L.binary("sub", L.unary("exp", L.scale(x, input_scale)), 1)
    return L.scale(_where(L, keep, x, L.scale(em1, alpha)), scale)


@rule("aten.elu_backward.default")
def elu_backward(L, grad, alpha, scale, input_scale, is_result, self_or_result):
    """x <= 0: grad * scale * input_scale * alpha * exp(x * input_scale), which is
    grad * input_scale * (result + scale * alpha) when given the result."""
    y = self_or_result
    if is_result:
        keep = L.binary("gt", y, 0, "bool", y.shape)
        neg = L.scale(L.binary("mul", grad, L.binary("add", y, Fraction(scale) *
                                                      Fraction(alpha))), input_scale)
    else:
        keep = L.binary("gt", y, 0, "bool", y.shape)
        e = L.unary("exp", L.scale(y, input_scale))
        neg = L.scale(L.binary("mul", grad, e), Fraction(scale) * Fraction(alpha) *
                      Fraction(input_scale))
    return _where(L, keep, L.scale(grad, scale), neg)


@rule("aten.hardtanh.default")
def hardtanh(L, x, min_val=-1, max_val=1):
    return L.binary("minimum", L.binary("maximum", _real(L, x), min_val), max_val)


@rule("aten.hardtanh_backward.default")
def hardtanh_backward(L, grad, x, min_val, max_val):
    above = L.binary("gt", x, min_val, "bool", x.shape)
    below = L.binary("lt", x, max_val, "bool", x.shape)
    inside = L.emit("where", [above, below, L.tensor(False, "bool")], x.shape, "bool")
    return _where(L, inside, grad, 0)


def _softplus(L, x, beta):
    """log(1 + exp(beta x)) / beta (torch switches to x above its threshold, a rounding
    matter: over the reals the two agree to within exp(-threshold))."""
    bx = L.scale(x, beta)
    return L.scale(L.unary("log", L.binary("add", L.unary("exp", bx), 1)), Fraction(1) /
                   Fraction(beta))


@rule("aten.softplus.default")
def softplus(L, x, beta=1, threshold=20):
    return _softplus(L, _real(L, x), beta)


@rule("aten.softplus_backward.default")
def softplus_backward(L, grad, x, beta, threshold):
    return L.binary("mul", grad, L.unary("sigmoid", L.scale(x, beta)))


@rule("aten.mish.default")
def mish(L, x):
    x = _real(L, x)
    return L.binary("mul", x, L.unary("tanh", _softplus(L, x, 1)))


@rule("aten.log_sigmoid_forward.default")
def log_sigmoid_forward(L, x):
    out = L.unary("log", L.unary("sigmoid", _real(L, x)))
    return [out, _Buffer()]


class _Buffer:
    """log_sigmoid's workspace output: no rule reads it (the backward recomputes)."""


@rule("aten.log_sigmoid_backward.default")
def log_sigmoid_backward(L, grad, x, buffer):
    return L.binary("mul", grad, L.unary("sigmoid", L.unary("neg", x)))


def _halves(L, x, dim):
    dim %= len(x.shape)
    h = x.shape[dim] // 2
    shape = list(x.shape)
    shape[dim] = h
    a, b = L.emit_multi("split", [x], [(shape, x.dtype), (shape, x.dtype)],
                        {"dim": dim, "sizes": [h, h]})
    return a, b, dim


@rule("aten.glu.default")
def glu(L, x, dim=-1):
    a, b, _ = _halves(L, _real(L, x), dim)
    return L.binary("mul", a, L.unary("sigmoid", b))


@rule("aten.glu_backward.default")
def glu_backward(L, grad, x, dim):
    """[grad * sigmoid(b), grad * a * sigmoid(b) (1 - sigmoid(b))] along dim."""
    a, b, dim = _halves(L, x, dim)
    s = L.unary("sigmoid", b)
    ga = L.binary("mul", grad, s, x.dtype, a.shape)
    ds = L.binary("mul", s, L.binary("sub", 1, s, x.dtype, s.shape), x.dtype, s.shape)
    gb = L.binary("mul", L.binary("mul", grad, a, x.dtype, a.shape), ds, x.dtype, a.shape)
    return L.emit("concat", [ga, gb], x.shape, x.dtype, {"dim": dim})


@rule("aten.log1p.default")
def log1p(L, x):
    return L.unary("log", L.binary("add", _real(L, x), 1))


@rule("aten.expm1.default")
def expm1(L, x):
    return L.binary("sub", L.unary("exp", _real(L, x)), 1)


@rule("aten.cos.default", "aten.sin.default")
def cos_sin(L, x):
    return map_fn(L, L.node.op.split(".")[1], x)


@rule("aten.pow.Tensor_Tensor", "aten.pow.Scalar")
def pow_general(L, base, exponent):
    """A tensor exponent (e.g. RoPE's theta ** (i / d)): pow as a function of two values."""
    return map_fn(L, "pow", base, exponent)
