"""Views, copies, casts, factories: ATen's shape ops -> reshape/transpose/slice/concat/
split/expand, aliases, const and iota."""
from .core import V, dclass, rule

ALIASES = ["aten.alias.default", "aten.detach.default", "aten.clone.default",
           "aten.lift_fresh_copy.default", "aten.contiguous.default",
           "aten.lift_fresh.default", "shardproof.mark_grad.default"]


@rule(*ALIASES)
def alias(L, x, *args, **kwargs):
    return x


@rule("aten.t.default")
def t(L, x):
    if len(x.shape) < 2:
        return x
    return L.emit("transpose", [x], x.shape[::-1], x.dtype, {"perm": [1, 0]})


@rule("aten.transpose.int")
def transpose(L, x, d0, d1):
    n = len(x.shape)
    perm = list(range(n))
    d0, d1 = d0 % n, d1 % n
    if d0 == d1:
        return x
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return L.emit("transpose", [x], [x.shape[p] for p in perm], x.dtype, {"perm": perm})


@rule("aten.permute.default")
def permute(L, x, dims):
    perm = [d % len(x.shape) for d in dims]
    if perm == sorted(perm):
        return x
    return L.emit("transpose", [x], [x.shape[p] for p in perm], x.dtype, {"perm": perm})


@rule("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default",
      "aten._reshape_alias.default", "aten.unsqueeze.default", "aten.squeeze.dim",
      "aten.squeeze.default", "aten.squeeze.dims", "aten.view_copy.default",
      "aten.flatten.using_ints", "aten.unflatten.int")
def view(L, x, *args, **kwargs):
    return L.reshape(x, L.out_meta().shape)


@rule("aten.expand.default", "aten.expand_copy.default")
def expand(L, x, size, implicit=False):
    shape = L.out_meta().shape
    if len(x.shape) < len(shape):  # ATen pads leading dims; the plan's expand does too
        pass
    return L.expand(x, shape)


@rule("aten._to_copy.default", "aten.to.dtype", "aten.type_as.default")
def to_copy(L, x, *args, **kwargs):
    return L.cast(x, L.out_meta().dtype)


@rule("aten.slice.Tensor")
def slice_(L, x, dim=0, start=None, end=None, step=1):
    dim %= len(x.shape)
    n = x.shape[dim]
    start = 0 if start is None else start
    end = n if end is None else end
    start = max(0, min(n, start + n if start < 0 else start))
    end = max(start, min(n, end + n if end < 0 else end))
    if step != 1:
        raise L.unsupported(f"slicing with step {step} (only step 1)")
    if start == 0 and end == n:
        return x
    shape = list(x.shape)
    shape[dim] = end - start
    return L.emit("slice", [x], shape, x.dtype, {"dim": dim, "start": start, "end": end})


@rule("aten.select.int")
def select(L, x, dim, index):
    dim %= len(x.shape)
    index %= x.shape[dim]
    s = slice_(L, x, dim, index, index + 1)
    return L.reshape(s, L.out_meta().shape)


@rule("aten.narrow.default")
def narrow(L, x, dim, start, length):
    return slice_(L, x, dim, start, start + length)


@rule("aten.cat.default")
def cat(L, tensors, dim=0):
    tensors = [t for t in tensors if isinstance(t, V) and not (t.shape == [0])]
    if len(tensors) == 1:
        return tensors[0]
    out = L.out_meta()
    dim %= len(out.shape)
    return L.emit("concat", tensors, out.shape, out.dtype, {"dim": dim})


@rule("aten.stack.default")
def stack(L, tensors, dim=0):
    out = L.out_meta()
    dim %= len(out.shape)
    parts = []
    for t_ in tensors:
        shape = list(t_.shape)
        shape.insert(dim, 1)
        parts.append(L.reshape(t_, shape))
    if len(parts) == 1:
        return parts[0]
    return L.emit("concat", parts, out.shape, out.dtype, {"dim": dim})


def _split(L, x, sizes, dim):
    dim %= len(x.shape)
    if len(sizes) == 1:
        return [x]
    metas = []
    for s in sizes:
        shape = list(x.shape)
        shape[dim] = s
        metas.append((shape, x.dtype))
    return L.emit_multi("split", [x], metas, {"dim": dim, "sizes": list(sizes)})


@rule("aten.split.Tensor")
def split(L, x, size, dim=0):
    n = x.shape[dim % len(x.shape)]
    sizes = [min(size, n - i) for i in range(0, n, size)]
    return _split(L, x, sizes, dim)


@rule("aten.split_with_sizes.default")
def split_with_sizes(L, x, sizes, dim=0):
    return _split(L, x, sizes, dim)


@rule("aten.unbind.int")
def unbind(L, x, dim=0):
    dim %= len(x.shape)
    pieces = _split(L, x, [1] * x.shape[dim], dim)
    shape = x.shape[:dim] + x.shape[dim + 1:]
    return [L.reshape(p, shape) for p in pieces]


@rule("aten.copy.default")
def copy(L, dst, src, non_blocking=False):
    out = L.out_meta()
    v = L.tensor(src, out.dtype)
    return L.expand(L.cast(v, out.dtype), out.shape)


# ---- factories: values never depend on memory contents we do not know

FACTORIES_FILL = {
    "aten.zeros.default": 0, "aten.ones.default": 1, "aten.zeros_like.default": 0,
    "aten.ones_like.default": 1, "aten.new_zeros.default": 0, "aten.new_ones.default": 1,
}


@rule(*FACTORIES_FILL)
def fill_factory(L, *args, **kwargs):
    out = L.out_meta()
    return L.const(FACTORIES_FILL[L.node.op], out.shape, out.dtype)


@rule("aten.full.default")
def full(L, size, value, **kwargs):
    out = L.out_meta()
    return L.const(value, out.shape, out.dtype)


@rule("aten.full_like.default", "aten.new_full.default", "aten.fill.Scalar")
def full_like(L, x, value, *args, **kwargs):
    out = L.out_meta()
    return L.const(value, out.shape, out.dtype)


@rule("aten.scalar_tensor.default")
def scalar_tensor(L, value, **kwargs):
    out = L.out_meta()
    return L.const(value, [], out.dtype)


@rule("aten.empty.memory_format", "aten.empty_like.default", "aten.new_empty.default",
      "aten.new_empty_strided.default", "aten.empty_strided.default")
def empty(L, *args, **kwargs):
    raise L.error("uninitialized", f"the program reads memory from {L.node.op} before writing "
                  "it")


@rule("aten.arange.default", "aten.arange.start", "aten.arange.start_step")
def arange(L, *args, **kwargs):
    nums = [a for a in args if isinstance(a, (int, float))]
    start, step = (nums[0], nums[2] if len(nums) > 2 else 1) if len(nums) > 1 else (0, 1)
    out = L.out_meta()
    v = L.iota(out.shape, 0)
    if dclass(out.dtype) != "int" or not isinstance(step, int) or not isinstance(start, int):
        v = L.cast(v, out.dtype)
    v = L.scale(v, step)
    if start != 0:
        v = L.binary("add", v, start, out.dtype, out.shape)
    return v
