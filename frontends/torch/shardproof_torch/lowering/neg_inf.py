"""Values that hold -inf: attention masks written the usual way (`masked_fill(m, -inf)`,
`full(-inf).triu(1)` added to the scores). The plan's numbers are reals, so such a tensor
is lowered as a pair: a finite `value` and a bool `mask` that says where the element is
-inf. The pair flows through the ops that keep it exact (shape ops, adding a finite tensor,
a positive scale, masked_fill, where, tril/triu, cat) and is consumed exactly by the ops
that turn -inf into numbers: softmax and exp give 0 there, max ignores it. Anything else
that meets a -inf is refused with the op and the user's line (docs/torch-harness.md,
"-inf")."""
import math

from .core import V, broadcast, dclass

INF_RULES = {}


class NegInf:
    """A tensor that is -inf where `mask` is true, `value` elsewhere (value is any finite
    number at the masked positions). `mask` broadcasts to `value`'s shape."""

    def __init__(self, value: V, mask: V, row_max=False):
        self.value = value
        self.mask = mask
        self.row_max = row_max  # a max over some dims: -inf only where all of them are

    @property
    def shape(self):
        return self.value.shape

    @property
    def dtype(self):
        return self.value.dtype


def inf_rule(*names):
    def register(fn):
        for n in names:
            INF_RULES[n] = fn
        return fn
    return register


def is_inf_number(x):
    return isinstance(x, float) and math.isinf(x)


# Ops where an infinite number is an attribute (a norm's order), not a value.
INF_AS_ATTRIBUTE = {"aten.linalg_vector_norm.default", "aten.norm.Scalar",
                    "aten.norm.ScalarOpt_dim", "aten.norm.ScalarOpt_dim_dtype",
                    "aten.norm.ScalarOpt_dtype"}


def holds_inf(a):
    if isinstance(a, NegInf) or is_inf_number(a):
        return True
    if isinstance(a, (list, tuple)):
        return any(holds_inf(x) for x in a)
    return False


def refuse(L, what=None):
    return L.error("infinity", f"{L.node.op}: " + (what or "a -inf value (an attention mask?) "
                   "reaches an op that cannot be modelled exactly over the reals; -inf may "
                   "flow through shape ops, adding finite values, a positive scale, "
                   "masked_fill, where, tril/triu and cat, into softmax, log_softmax, exp or "
                   "max"))


def _finite(L, x, dtype):
    if is_inf_number(x):
        raise refuse(L, "+inf cannot be modelled over the reals" if x > 0 else None)
    return L.cast(L.tensor(x, dtype), dtype)


def _split(L, x, dtype, shape):
    """(value, mask) of any operand: -inf numbers and pairs are split, finite ones get a
    mask that is false everywhere."""
    if isinstance(x, NegInf):
        return x.value, x.mask
    if is_inf_number(x):
        if x > 0:
            raise refuse(L, "+inf cannot be modelled over the reals")
        return L.tensor(0, dtype), L.tensor(True, "bool")
    return _finite(L, x, dtype), L.tensor(False, "bool")


def _or(L, a, b):
    shape = broadcast(a, b)
    return L.emit("where", [a, L.tensor(True, "bool"), b], shape, "bool", base="neginf_mask")


def _and_not(L, a, b):
    shape = broadcast(a, b)
    return L.emit("where", [b, L.tensor(False, "bool"), a], shape, "bool", base="neginf_mask")


def _where(L, c, a, b, dtype):
    shape = broadcast(c, a, b)
    return L.emit("where", [L.cast(c, "bool"), a, b], shape, dtype)


def _mask_to(L, mask, shape):
    return L.expand(mask, shape) if mask.shape != shape else mask


# ---- sources: -inf enters as a number

@inf_rule("shardproof.constant")
def constant(L, value):
    """A tensor constant holding -inf (`nn.Transformer.generate_square_subsequent_mask`):
    its finite elements with 0 where -inf, and the mask of the -inf ones."""
    from .rules_shape import constant as finite_constant
    if not isinstance(value, list):
        return full(L, value)
    if any(is_inf_number(v) and v > 0 for v in value):
        raise refuse(L, "+inf cannot be modelled over the reals")
    finite = finite_constant(L, [0 if is_inf_number(v) else v for v in value])
    mask = _with_dtype(finite_constant, "bool")(L, [is_inf_number(v) for v in value])
    return NegInf(finite, mask)


@inf_rule("aten.full.default", "aten.full_like.default", "aten.fill.Scalar",
          "aten.new_full.default", "aten.scalar_tensor.default")
def full(L, *args, **kwargs):
    value = next(a for a in list(args) + list(kwargs.values()) if is_inf_number(a))
    out = L.out_meta()
    _, mask = _split(L, value, out.dtype, out.shape)
    return NegInf(L.const(0, out.shape, out.dtype), _mask_to(L, mask, out.shape))


@inf_rule("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def masked_fill(L, x, mask, value):
    out = L.out_meta()
    xv, xm = _split(L, x, out.dtype, out.shape)
    mask = L.cast(mask, "bool")
    if isinstance(value, NegInf):
        raise refuse(L)
    if is_inf_number(value):
        _split(L, value, out.dtype, out.shape)  # refuses +inf
        return NegInf(xv, _mask_to(L, _or(L, xm, mask), out.shape))
    fill = _finite(L, value, out.dtype)
    return NegInf(_where(L, mask, fill, xv, out.dtype), _mask_to(L, _and_not(L, xm, mask),
                                                                   out.shape))


@inf_rule("aten.where.self", "aten.where.ScalarOther", "aten.where.ScalarSelf",
          "aten.where.Scalar")
def where(L, c, a, b):
    out = L.out_meta()
    av, am = _split(L, a, out.dtype, out.shape)
    bv, bm = _split(L, b, out.dtype, out.shape)
    mask = _where(L, c, am, bm, "bool")
    return NegInf(_where(L, c, av, bv, out.dtype), _mask_to(L, mask, out.shape))


# ---- arithmetic that keeps -inf exact

@inf_rule("aten.add.Tensor", "aten.add.Scalar")
def add(L, a, b, alpha=1):
    if alpha != 1 and (isinstance(b, NegInf) or is_inf_number(b)) and not alpha > 0:
        raise refuse(L)
    out = L.out_meta()
    av, am = _split(L, a, out.dtype, out.shape)
    bv, bm = _split(L, b, out.dtype, out.shape)
    if alpha != 1:
        bv = L.scale(L.cast(bv, out.dtype), alpha)
    return NegInf(L.binary("add", av, bv), _mask_to(L, _or(L, am, bm), out.shape))


@inf_rule("aten.sub.Tensor", "aten.sub.Scalar")
def sub(L, a, b, alpha=1):
    """Subtracting a pair is allowed only as `x - max(x)`'s shape: the subtrahend is -inf
    only where a whole row is (NaN in torch, out of scope); a -inf number is refused."""
    if is_inf_number(b) or not alpha > 0 or (isinstance(b, NegInf) and not b.row_max):
        raise refuse(L, "subtracting -inf gives +inf, which cannot be modelled over the reals "
                     "(only x - max(x) is: a row that is -inf everywhere is out of scope)")
    out = L.out_meta()
    av, am = _split(L, a, out.dtype, out.shape)
    bv = b.value if isinstance(b, NegInf) else L.cast(L.tensor(b, out.dtype), out.dtype)
    return NegInf(L.binary("sub", av, L.scale(bv, alpha)), _mask_to(L, am, out.shape))


@inf_rule("aten.maximum.default", "aten.minimum.default")
def max_min(L, a, b):
    """maximum(-inf, y) = y; minimum(-inf, y) = -inf."""
    out = L.out_meta()
    av, am = _split(L, a, out.dtype, out.shape)
    bv, bm = _split(L, b, out.dtype, out.shape)
    both = L.binary("maximum" if "maximum" in L.node.op else "minimum", av, bv)
    if "minimum" in L.node.op:
        return NegInf(both, _mask_to(L, _or(L, am, bm), out.shape))
    value = _where(L, am, bv, _where(L, bm, av, both, out.dtype), out.dtype)
    only = L.emit("where", [am, bm, L.tensor(False, "bool")], broadcast(am, bm), "bool",
                  base="neginf_mask")
    return NegInf(value, _mask_to(L, only, out.shape))


def _positive_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 and \
        not math.isinf(x)


@inf_rule("aten.mul.Tensor", "aten.mul.Scalar", "aten.div.Tensor", "aten.div.Scalar")
def mul_div(L, a, b):
    """Only a pair times (or over) a positive number: the sign of a tensor is unknown."""
    if not isinstance(a, NegInf) or not _positive_number(b):
        if "mul" in L.node.op and isinstance(b, NegInf) and _positive_number(a):
            a, b = b, a
        else:
            raise refuse(L, "-inf times (or over) anything but a positive number is not "
                         "modelled (its sign, or 0 * inf, is unknown)")
    factor = b if "mul" in L.node.op else 1 / b
    return NegInf(L.scale(a.value, factor), a.mask, a.row_max)


@inf_rule("aten.exp.default")
def exp(L, x):
    out = L.out_meta()
    e = L.unary("exp", L.cast(x.value, out.dtype))
    return _where(L, x.mask, L.tensor(0, out.dtype), e, out.dtype)


# ---- shape ops: the same op on the value and on the mask

def _on_both(L, fn, x, *args, **kwargs):
    value = fn(L, x.value, *args, **kwargs)
    mask = fn(L, _mask_to(L, x.mask, x.shape), *args, **kwargs)
    if isinstance(value, (list, tuple)):
        return [NegInf(v, m, x.row_max) for v, m in zip(value, mask)]
    return NegInf(value, mask, x.row_max)


def _shape_rule(name):
    from .core import RULES
    finite = RULES[name]

    def lowered(L, x, *args, **kwargs):
        if not isinstance(x, NegInf):
            raise refuse(L)
        return _on_both(L, _keep_dtype(finite), x, *args, **kwargs)
    return lowered


def _keep_dtype(finite):
    """The finite rule with the operand's dtype as the output's (a mask stays bool)."""
    def run(L, x, *args, **kwargs):
        return _with_dtype(finite, x.dtype)(L, x, *args, **kwargs)
    return run


def _with_dtype(finite, dtype):
    """A finite rule run with the node's output dtype replaced by `dtype`: the rules read
    the output's shape and dtype from the node, and a mask's dtype is bool."""
    def run(L, *args, **kwargs):
        meta = L.node.outs[0]
        original = L.out_meta

        class _Meta:
            shape = meta.shape
            contiguous = meta.contiguous

        _Meta.dtype = dtype
        L.out_meta = lambda i=0: _Meta if i == 0 else original(i)
        try:
            return finite(L, *args, **kwargs)
        finally:
            L.out_meta = original
    return run


SHAPE_OPS = ["aten.view.default", "aten._unsafe_view.default", "aten._reshape_alias.default",
             "aten.unsqueeze.default", "aten.squeeze.dim", "aten.squeeze.default",
             "aten.expand.default", "aten.t.default", "aten.transpose.int",
             "aten.permute.default", "aten.slice.Tensor", "aten.select.int",
             "aten.alias.default", "aten.detach.default", "aten.clone.default",
             "aten.lift_fresh_copy.default", "aten.as_strided.default",
             "aten.tril.default", "aten.triu.default"]


def register_shape_ops():
    for name in SHAPE_OPS:
        INF_RULES[name] = _shape_rule(name)


@inf_rule("aten._to_copy.default")
def to_copy(L, x, *args, **kwargs):
    out = L.out_meta()
    if dclass(out.dtype) != "real":
        raise refuse(L, "-inf cast to an integer or bool type")
    return NegInf(L.cast(x.value, out.dtype), x.mask, x.row_max)


@inf_rule("aten.cat.default")
def cat(L, tensors, dim=0):
    from .core import RULES
    out = L.out_meta()
    values, masks = [], []
    for t in tensors:
        if isinstance(t, V) and t.shape == [0]:
            continue
        v, m = _split(L, t, out.dtype, t.shape)
        values.append(v)
        masks.append(_mask_to(L, m, v.shape))
    value = RULES["aten.cat.default"](L, values, dim)
    mask = L.emit("concat", masks, out.shape, "bool", {"dim": dim % len(out.shape)},
                  base="neginf_mask") if len(masks) > 1 else masks[0]
    return NegInf(value, mask)


# ---- consumers: -inf becomes numbers

def _row_shift(L, x, dim):
    """Any finite value per row works as softmax's shift: the row's max of the finite
    values (masked positions included) keeps the exponents small."""
    return L.reduce("max", x.value, [dim], True)


@inf_rule("aten._softmax.default")
def softmax(L, x, dim, half_to_float=False):
    out = L.out_meta()
    dim %= len(x.shape)
    e = exp_shifted(L, x, dim, out.dtype)
    total = L.reduce("sum", e, [dim], True)
    return L.binary("div", e, total, out.dtype, out.shape)


def exp_shifted(L, x, dim, dtype):
    shifted = L.binary("sub", x.value, _row_shift(L, x, dim), dtype, x.shape)
    e = L.unary("exp", shifted)
    return _where(L, _mask_to(L, x.mask, x.shape), L.tensor(0, dtype), e, dtype)


@inf_rule("aten._log_softmax.default")
def log_softmax(L, x, dim, half_to_float=False):
    """-inf stays -inf where masked; elsewhere (x - s) - log(sum of exp(x - s))."""
    out = L.out_meta()
    dim %= len(x.shape)
    s = _row_shift(L, x, dim)
    e = exp_shifted(L, x, dim, out.dtype)
    lse = L.unary("log", L.reduce("sum", e, [dim], True))
    value = L.binary("sub", L.binary("sub", x.value, s, out.dtype, out.shape), lse,
                     out.dtype, out.shape)
    return NegInf(value, _mask_to(L, x.mask, out.shape))


def _masked_max(L, x, dims, keepdim):
    """max over the unmasked elements: masked ones are replaced by the row's minimum of the
    finite values, which never exceeds an unmasked one. A row that is all -inf stays -inf."""
    dims = [d % len(x.shape) for d in dims]
    mask = _mask_to(L, x.mask, x.shape)
    low = L.unary("neg", L.reduce("max", L.unary("neg", x.value), dims, True))
    filled = _where(L, mask, low, x.value, x.dtype)
    value = L.reduce("max", filled, dims, keepdim)
    kept = L.cast(L.emit("where", [mask, L.tensor(False, "bool"), L.tensor(True, "bool")],
                         x.shape, "bool", base="neginf_kept"), x.dtype)
    any_kept = L.reduce("max", kept, dims, keepdim)
    all_masked = L.binary("eq", any_kept, 0, "bool", any_kept.shape)
    return NegInf(value, all_masked, row_max=True)


@inf_rule("aten.amax.default")
def amax(L, x, dims=None, keepdim=False):
    dims = list(range(len(x.shape))) if not dims else ([dims] if isinstance(dims, int) else dims)
    return _masked_max(L, x, dims, keepdim)


@inf_rule("aten.max.default")
def max_all(L, x):
    return _masked_max(L, x, list(range(len(x.shape))), False)


@inf_rule("aten.max.dim")
def max_dim(L, x, dim, keepdim=False):
    from .rules_reduce import _Unavailable
    return [_masked_max(L, x, [dim], keepdim), _Unavailable(L, "the indices of max(dim)")]


@inf_rule("aten._log_softmax_backward_data.default")
def log_softmax_backward(L, grad, y, dim, input_dtype):
    """grad - exp(y) * sum(grad): exp(-inf) = 0 where the input was masked."""
    if isinstance(grad, NegInf) or not isinstance(y, NegInf):
        raise refuse(L)
    out = L.out_meta()
    ey = _where(L, _mask_to(L, y.mask, y.shape), L.tensor(0, out.dtype),
                L.unary("exp", y.value), out.dtype)
    s = L.reduce("sum", grad, [dim], True)
    return L.binary("sub", grad, L.binary("mul", ey, s, out.dtype, out.shape), out.dtype,
                    out.shape)


@inf_rule("aten.baddbmm.default", "aten.addmm.default")
def addmm(L, bias, a, b, beta=1, alpha=1):
    """A -inf additive mask as the bias of a batched product (nn.MultiheadAttention):
    beta * bias + alpha * a @ b keeps the bias's -inf."""
    from .rules_reduce import addmm as finite_addmm
    if not isinstance(bias, NegInf) or isinstance(a, NegInf) or isinstance(b, NegInf) or \
            not beta > 0:
        raise refuse(L)
    out = L.out_meta()
    value = finite_addmm(L, bias.value, a, b, beta, alpha)
    return NegInf(value, _mask_to(L, bias.mask, out.shape))
