"""Neural-network composites and their backward ops: softmax, log_softmax, layer norm,
group norm, losses, dropout (only p = 0), tril/triu."""
from .core import V, rule


@rule("aten._softmax.default")
def softmax(L, x, dim, half_to_float=False):
    return L.emit("softmax", [x], x.shape, L.out_meta().dtype, {"dim": dim % len(x.shape)})


@rule("aten._log_softmax.default")
def log_softmax(L, x, dim, half_to_float=False):
    return L.emit("log_softmax", [x], x.shape, L.out_meta().dtype, {"dim": dim % len(x.shape)})


@rule("aten._softmax_backward_data.default")
def softmax_backward(L, grad, y, dim, input_dtype):
    # dx = y * (g - sum(g * y, dim))
    gy = L.binary("mul", grad, y)
    s = L.reduce("sum", gy, [dim], True)
    return L.binary("mul", y, L.binary("sub", grad, s))


@rule("aten._log_softmax_backward_data.default")
def log_softmax_backward(L, grad, y, dim, input_dtype):
    # dx = g - exp(y) * sum(g, dim)
    s = L.reduce("sum", grad, [dim], True)
    return L.binary("sub", grad, L.binary("mul", L.unary("exp", y), s))


def _norm_dims(x, normalized_shape, L):
    k = len(normalized_shape)
    if not 1 <= k <= len(x.shape):
        raise L.unsupported(f"layer norm over {k} dims of a rank-{len(x.shape)} tensor")
    return list(range(len(x.shape) - k, len(x.shape)))


@rule("aten.native_layer_norm.default")
def layer_norm(L, x, normalized_shape, w, b, eps):
    dims = _norm_dims(x, normalized_shape, L)
    mean = L.reduce("mean", x, dims, True)
    xc = L.binary("sub", x, mean, x.dtype, x.shape)
    var = L.reduce("mean", L.binary("mul", xc, xc, x.dtype, x.shape), dims, True)
    rstd = L.unary("rsqrt", L.binary("add", var, eps, x.dtype, var.shape))
    y = L.binary("mul", xc, rstd, x.dtype, x.shape)
    if isinstance(w, V):
        y = L.binary("mul", y, w, x.dtype, x.shape)
    if isinstance(b, V):
        y = L.binary("add", y, b, x.dtype, x.shape)
    return [y, mean, rstd]


@rule("aten.native_layer_norm_backward.default")
def layer_norm_backward(L, grad, x, normalized_shape, mean, rstd, w, b, output_mask):
    dims = _norm_dims(x, normalized_shape, L)
    lead = list(range(len(x.shape) - len(dims)))
    xhat = L.binary("mul", L.binary("sub", x, mean, x.dtype, x.shape), rstd, x.dtype, x.shape)
    outs = [None, None, None]
    if output_mask[0]:
        g = L.binary("mul", grad, w, x.dtype, x.shape) if isinstance(w, V) else grad
        # dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
        mg = L.reduce("mean", g, dims, True)
        mgx = L.reduce("mean", L.binary("mul", g, xhat, x.dtype, x.shape), dims, True)
        inner = L.binary("sub", L.binary("sub", g, mg, x.dtype, x.shape),
                         L.binary("mul", xhat, mgx, x.dtype, x.shape), x.dtype, x.shape)
        outs[0] = L.binary("mul", inner, rstd, x.dtype, x.shape)
    if output_mask[1] and isinstance(w, V):
        outs[1] = L.reduce("sum", L.binary("mul", grad, xhat, x.dtype, x.shape), lead, False)
    if output_mask[2] and isinstance(b, V):
        outs[2] = L.reduce("sum", grad, lead, False)
    return outs


def _group_view(L, x, n, c, hxw, groups):
    """x as [N, G, C/G * HxW]: each group's channels and positions in one row."""
    if groups <= 0 or c % groups or n * c * hxw != _numel(x.shape):
        raise L.unsupported(f"group norm with {groups} groups of {c} channels")
    return L.reshape(x, [n, groups, (c // groups) * hxw])


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _per_channel(L, v, c):
    """A [C] weight as [C, 1], to broadcast over a [N, C, HxW] view."""
    return L.reshape(v, [c, 1])


@rule("aten.native_group_norm.default")
def group_norm(L, x, w, b, n, c, hxw, groups, eps):
    xg = _group_view(L, x, n, c, hxw, groups)
    mean = L.reduce("mean", xg, [2], True)
    xc = L.binary("sub", xg, mean, x.dtype, xg.shape)
    var = L.reduce("mean", L.binary("mul", xc, xc, x.dtype, xg.shape), [2], True)
    rstd = L.unary("rsqrt", L.binary("add", var, eps, x.dtype, var.shape))
    y = L.reshape(L.binary("mul", xc, rstd, x.dtype, xg.shape), [n, c, hxw])
    if isinstance(w, V):
        y = L.binary("mul", y, _per_channel(L, w, c), x.dtype, y.shape)
    if isinstance(b, V):
        y = L.binary("add", y, _per_channel(L, b, c), x.dtype, y.shape)
    return [L.reshape(y, x.shape), L.reshape(mean, [n, groups]), L.reshape(rstd, [n, groups])]


@rule("aten.native_group_norm_backward.default")
def group_norm_backward(L, grad, x, mean, rstd, w, n, c, hxw, groups, output_mask):
    xg = _group_view(L, x, n, c, hxw, groups)
    mean3, rstd3 = L.reshape(mean, [n, groups, 1]), L.reshape(rstd, [n, groups, 1])
    xhat = L.binary("mul", L.binary("sub", xg, mean3, x.dtype, xg.shape), rstd3, x.dtype,
                    xg.shape)
    xhat_c = L.reshape(xhat, [n, c, hxw])
    grad_c = L.reshape(grad, [n, c, hxw])
    outs = [None, None, None]
    if output_mask[0]:
        g = L.binary("mul", grad_c, _per_channel(L, w, c), x.dtype, grad_c.shape) \
            if isinstance(w, V) else grad_c
        g = L.reshape(g, xg.shape)
        # dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), over each group's row
        mg = L.reduce("mean", g, [2], True)
        mgx = L.reduce("mean", L.binary("mul", g, xhat, x.dtype, xg.shape), [2], True)
        inner = L.binary("sub", L.binary("sub", g, mg, x.dtype, xg.shape),
                         L.binary("mul", xhat, mgx, x.dtype, xg.shape), x.dtype, xg.shape)
        outs[0] = L.reshape(L.binary("mul", inner, rstd3, x.dtype, xg.shape), x.shape)
    if output_mask[1] and isinstance(w, V):
        outs[1] = L.reduce("sum", L.binary("mul", grad_c, xhat_c, x.dtype, grad_c.shape),
                           [0, 2], False)
    if output_mask[2]:
        outs[2] = L.reduce("sum", grad_c, [0, 2], False)
    return outs


def _reduce_loss(L, per_elem, reduction):
    if reduction == 0:
        return per_elem
    op = "mean" if reduction == 1 else "sum"
    return L.reduce(op, per_elem, list(range(len(per_elem.shape))), False)


@rule("aten.mse_loss.default")
def mse_loss(L, x, y, reduction=1):
    d = L.binary("sub", x, y, x.dtype)
    return _reduce_loss(L, L.binary("mul", d, d, x.dtype, d.shape), reduction)


@rule("aten.mse_loss_backward.default")
def mse_loss_backward(L, grad, x, y, reduction):
    d = L.binary("sub", x, y, x.dtype)
    n = 1
    for s in d.shape:
        n *= s
    factor = 2 if reduction != 1 else __import__("fractions").Fraction(2, n)
    return L.scale(L.binary("mul", d, grad, x.dtype, d.shape), factor)


def _nll_checks(L, x, weight, ignore_index):
    if weight is not None:
        raise L.unsupported("nll_loss/cross_entropy with class weights")
    if len(x.shape) not in (1, 2):
        raise L.unsupported("nll_loss on inputs of rank other than 1 or 2 (flatten first)")


def _ignores_a_class(ignore_index, classes):
    """Whether targets can equal `ignore_index`: only when it names a class (a pad id
    such as 0). The engine assumes a target a valid class index, so the default -100,
    or any index outside 0..C-1, never occurs and needs no mask."""
    return 0 <= ignore_index < classes


def _kept(L, target, ignore_index, dtype):
    """1.0 where the target is not ignored, 0.0 where it is."""
    hit = L.binary("eq", target, ignore_index, "bool", target.shape)
    keep = L.binary("eq", hit, L.tensor(False, "bool"), "bool", target.shape)
    return L.cast(keep, dtype)


@rule("aten.nll_loss_forward.default")
def nll_loss_forward(L, x, target, weight, reduction, ignore_index):
    _nll_checks(L, x, weight, ignore_index)
    x2 = x if len(x.shape) == 2 else L.reshape(x, [1, x.shape[0]])
    n, c = x2.shape
    idx = L.reshape(target, [n, 1])
    picked = L.emit("gather", [x2, idx], [n, 1], x.dtype, {"dim": 1})
    picked = L.reshape(picked, [n])
    if not _ignores_a_class(ignore_index, c):
        picked = L.reshape(picked, [n] if len(x.shape) == 2 else [])
        loss = L.unary("neg", _reduce_loss(L, picked, reduction))
        total = L.const(n if reduction == 1 else 1, [], x.dtype)
        return [loss, total]
    # torch: an ignored target adds 0, and the mean divides by the targets kept
    # (0/0, NaN in torch, when all are ignored: outside the plan contract).
    keep = _kept(L, L.reshape(target, [n]), ignore_index, x.dtype)
    kept = L.binary("mul", picked, keep, x.dtype, [n])
    total = L.reduce("sum", keep, [0], False)
    if reduction == 0:
        return [L.unary("neg", L.reshape(kept, [n] if len(x.shape) == 2 else [])), total]
    summed = L.reduce("sum", kept, [0], False)
    if reduction == 1:
        summed = L.binary("div", summed, total, x.dtype, [])
    return [L.unary("neg", summed), total]


@rule("aten.nll_loss_backward.default")
def nll_loss_backward(L, grad, x, target, weight, reduction, ignore_index, total_weight):
    _nll_checks(L, x, weight, ignore_index)
    x2shape = x.shape if len(x.shape) == 2 else [1, x.shape[0]]
    n, c = x2shape
    hit = L.binary("eq", L.reshape(target, [n, 1]), L.iota([1, c], 1), "bool", [n, c])
    onehot = L.cast(hit, x.dtype)
    g = L.reshape(grad, [n, 1]) if grad.shape else grad
    out = L.binary("mul", onehot, g, x.dtype, [n, c])
    from fractions import Fraction
    if not _ignores_a_class(ignore_index, c):
        out = L.scale(out, Fraction(-1, n) if reduction == 1 else -1)
        return L.reshape(out, x.shape)
    keep = _kept(L, L.reshape(target, [n, 1]), ignore_index, x.dtype)
    out = L.binary("mul", out, keep, x.dtype, [n, c])
    if reduction == 1:
        out = L.binary("div", out, total_weight, x.dtype, [n, c])
    return L.reshape(L.scale(out, -1), x.shape)


@rule("aten.native_dropout.default")
def native_dropout(L, x, p, train):
    if train and p > 0:
        raise L.error("dropout", f"dropout with p={p} > 0 makes the step random; set p=0 (or "
                      "eval mode) for verification")
    return [x, L.const(True, x.shape, "bool")]


# Refusals, not lowerings (tested by the bad-input tests).
@rule("aten.bernoulli.p", "aten.bernoulli_.float", "aten.bernoulli.default", "aten.bernoulli.Tensor",
      "aten.normal.default",
      "aten.rand.default", "aten.randn.default", "aten.rand_like.default",
      "aten.randn_like.default", "aten.randint.low", "aten.randint.default",
      "aten.uniform_.default", "aten.normal_.default", "aten.uniform.default")
def random(L, *args, **kwargs):
    raise L.error("random", f"{L.node.op}: random values inside the step cannot be verified "
                  "(dropout with p > 0? set p=0 or use eval mode)")


def _band(L, x, diagonal, lower):
    r, c = x.shape[-2], x.shape[-1]
    rows = L.iota([r, 1], 0)
    if diagonal:
        rows = L.binary("add", rows, diagonal, "i64", [r, 1])
    cols = L.iota([1, c], 1)
    keep = L.binary("ge" if lower else "le", rows, cols, "bool", [r, c])
    return L.emit("where", [keep, x, L.tensor(0, x.dtype)], x.shape, x.dtype)


@rule("aten.tril.default")
def tril(L, x, diagonal=0):
    return _band(L, x, diagonal, True)


@rule("aten.triu.default")
def triu(L, x, diagonal=0):
    return _band(L, x, diagonal, False)


# ---- losses over a class dim that is not last, and more regression losses

def _classes_last(L, x, target):
    """[N, C, d...] -> ([N*d..., C], [N*d...]) so that the 2-D rules apply."""
    n, c = x.shape[0], x.shape[1]
    rest = x.shape[2:]
    perm = [0] + list(range(2, len(x.shape))) + [1]
    moved = L.emit("transpose", [x], [x.shape[p] for p in perm], x.dtype, {"perm": perm})
    m = n
    for s in rest:
        m *= s
    return L.reshape(moved, [m, c]), L.reshape(target, [m]), perm, [x.shape[p] for p in perm]


@rule("aten.nll_loss2d_forward.default")
def nll_loss2d_forward(L, x, target, weight, reduction, ignore_index):
    x2, t2, _, _ = _classes_last(L, x, target)
    loss, total = nll_loss_forward(L, x2, t2, weight, reduction, ignore_index)
    return [L.reshape(loss, L.out_meta().shape), total]


@rule("aten.nll_loss2d_backward.default")
def nll_loss2d_backward(L, grad, x, target, weight, reduction, ignore_index, total_weight):
    x2, t2, perm, moved = _classes_last(L, x, target)
    if reduction == 0:
        grad = L.reshape(grad, [x2.shape[0]])
    g2 = nll_loss_backward(L, grad, x2, t2, weight, reduction, ignore_index, total_weight)
    back = L.reshape(g2, moved)
    inverse = [perm.index(d) for d in range(len(perm))]
    return L.emit("transpose", [back], x.shape, x.dtype, {"perm": inverse})


def _pointwise_loss(L, x, y, beta, kind):
    """smooth_l1 (kind 'smooth'): |d| < beta ? d^2 / (2 beta) : |d| - beta / 2;
    huber: |d| < delta ? d^2 / 2 : delta (|d| - delta / 2)."""
    from fractions import Fraction
    from .numbers import as_fraction, exact
    b = as_fraction(exact(beta))
    d = L.binary("sub", x, y, x.dtype)
    ad = L.binary("maximum", d, L.unary("neg", d), x.dtype, d.shape)
    small = L.binary("lt", ad, beta, "bool", d.shape)
    sq = L.binary("mul", d, d, x.dtype, d.shape)
    if kind == "smooth":
        inner = L.scale(sq, Fraction(1, 2) / b)
        outer = L.binary("sub", ad, b / 2, x.dtype, d.shape)
    else:
        inner = L.scale(sq, Fraction(1, 2))
        outer = L.scale(L.binary("sub", ad, b / 2, x.dtype, d.shape), b)
    return L.emit("where", [small, inner, outer], d.shape, x.dtype), d, small, b


@rule("aten.smooth_l1_loss.default", "aten.huber_loss.default")
def smooth_l1_loss(L, x, y, reduction=1, beta=1.0):
    per, _, _, _ = _pointwise_loss(L, x, y, beta, "smooth" if "smooth" in L.node.op else "huber")
    return _reduce_loss(L, per, reduction)


@rule("aten.smooth_l1_loss_backward.default", "aten.huber_loss_backward.default")
def smooth_l1_loss_backward(L, grad, x, y, reduction, beta):
    from fractions import Fraction
    kind = "smooth" if "smooth" in L.node.op else "huber"
    _, d, small, b = _pointwise_loss(L, x, y, beta, kind)
    sign = L.emit("where", [L.binary("gt", d, 0, "bool", d.shape), L.tensor(1, x.dtype),
                            L.tensor(-1, x.dtype)], d.shape, x.dtype)
    inner = L.scale(d, Fraction(1) / b) if kind == "smooth" else d
    outer = sign if kind == "smooth" else L.scale(sign, b)
    local = L.emit("where", [small, inner, outer], d.shape, x.dtype)
    n = 1
    for s in d.shape:
        n *= s
    g = L.binary("mul", local, grad, x.dtype, d.shape)
    return L.scale(g, Fraction(1, n)) if reduction == 1 else g


@rule("aten.xlogy.Tensor", "aten.xlogy.Scalar_Other", "aten.xlogy.Scalar_Self")
def xlogy(L, x, y):
    """x * log(y), and 0 where x == 0 (KL divergence's target term)."""
    out = L.out_meta()
    x = L.cast(L.tensor(x, out.dtype), out.dtype)
    y = L.cast(L.tensor(y, out.dtype), out.dtype)
    prod = L.binary("mul", x, L.unary("log", y))
    zero = L.binary("eq", x, 0, "bool", x.shape)
    return L.emit("where", [zero, L.tensor(0, out.dtype), prod], out.shape, out.dtype)
