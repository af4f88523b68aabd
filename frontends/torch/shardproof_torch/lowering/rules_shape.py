"""Views, copies, casts, factories: ATen's shape ops -> reshape/transpose/slice/concat/
split/expand, aliases, const and iota."""
from .core import V, dclass, rule

ALIASES = ["aten.alias.default", "aten.detach.default", "aten.clone.default",
           "aten.lift_fresh_copy.default", "shardproof.mark_grad.default"]


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


@rule("aten.view.default", "aten._unsafe_view.default", "aten._reshape_alias.default",
      "aten.unsqueeze.default", "aten.squeeze.dim", "aten.squeeze.default")
def view(L, x, *args, **kwargs):
    return L.reshape(x, L.out_meta().shape)


@rule("aten.expand.default")
def expand(L, x, size, implicit=False):
    shape = L.out_meta().shape
    if len(x.shape) < len(shape):  # ATen pads leading dims; the plan's expand does too
        pass
    return L.expand(x, shape)


@rule("aten._to_copy.default")
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
        return _strided(L, x, dim, start, end, step)
    if start == 0 and end == n:
        return x
    shape = list(x.shape)
    shape[dim] = end - start
    return L.emit("slice", [x], shape, x.dtype, {"dim": dim, "start": start, "end": end})


def _strided(L, x, dim, start, end, step):
    """x[start:end:step] along dim: the range, padded to a multiple of step, is cut into
    rows of `step` and the first of each row is kept (x[..., ::2] of RoPE's pairs)."""
    if step < 1:
        raise L.unsupported(f"slicing with step {step}")
    k = max(0, -(-(end - start) // step))  # elements taken
    if k == 0:
        raise L.unsupported("an empty strided slice")
    piece = slice_(L, x, dim, start, min(end, start + k * step))
    got = piece.shape[dim]
    if got < k * step:
        pad = list(piece.shape)
        pad[dim] = k * step - got
        padded = list(piece.shape)
        padded[dim] = k * step
        piece = L.emit("concat", [piece, L.const(0, pad, x.dtype)], padded, x.dtype,
                       {"dim": dim})
    rows = piece.shape[:dim] + [k, step] + piece.shape[dim + 1:]
    firsts = slice_(L, L.reshape(piece, rows), dim + 1, 0, 1)
    return L.reshape(firsts, piece.shape[:dim] + [k] + piece.shape[dim + 1:])


@rule("aten.select.int")
def select(L, x, dim, index):
    dim %= len(x.shape)
    index %= x.shape[dim]
    s = slice_(L, x, dim, index, index + 1)
    return L.reshape(s, L.out_meta().shape)


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


@rule("aten.full_like.default", "aten.fill.Scalar")
def full_like(L, x, value, *args, **kwargs):
    out = L.out_meta()
    return L.const(value, out.shape, out.dtype)


@rule("aten.new_full.default")
def new_full(L, x, size, value, **kwargs):
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


@rule("shardproof.constant")
def constant(L, value):
    """One value, or the row-major elements: a concat of one const per run of equal ones."""
    out = L.out_meta()
    if not isinstance(value, list):
        return L.const(value, out.shape, out.dtype)
    runs = []
    for v in value:
        if runs and runs[-1][0] == v:
            runs[-1][1] += 1
        else:
            runs.append([v, 1])
    pieces = [L.const(v, [n], out.dtype) for v, n in runs]
    flat = pieces[0] if len(pieces) == 1 else \
        L.emit("concat", pieces, [len(value)], out.dtype, {"dim": 0})
    return L.reshape(flat, out.shape)


@rule("aten.slice_scatter.default")
def slice_scatter(L, base, src, dim=0, start=None, end=None, step=1):
    """base with base[start:end] along dim replaced by src: a concat of three pieces."""
    dim %= len(base.shape)
    n = base.shape[dim]
    start = 0 if start is None else (start + n if start < 0 else start)
    end = n if end is None else min(n, end + n if end < 0 else end)
    if step != 1:
        raise L.unsupported(f"slice_scatter with step {step}")
    src = L.cast(src, base.dtype)
    pieces = []
    if start > 0:
        pieces.append(slice_(L, base, dim, 0, start))
    pieces.append(src)
    if end < n:
        pieces.append(slice_(L, base, dim, end, n))
    if len(pieces) == 1:
        return src
    return L.emit("concat", pieces, base.shape, base.dtype, {"dim": dim})


@rule("aten.select_scatter.default")
def select_scatter(L, base, src, dim, index):
    dim %= len(base.shape)
    index %= base.shape[dim]
    shape = list(base.shape)
    shape[dim] = 1
    return slice_scatter(L, base, L.reshape(src, shape), dim, index, index + 1)


def _row_major(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return list(reversed(strides))


@rule("aten.as_strided.default")
def as_strided(L, x, size, stride, storage_offset=0):
    """Only the form functionalization writes for a plain reshape: row-major strides over
    an input that is itself row-major in memory from offset 0."""
    src_meta = L.trace.meta(L.node.args[0])
    n_in = 1
    for s in x.shape:
        n_in *= s
    n_out = 1
    for s in size:
        n_out *= s
    if (storage_offset or 0) == 0 and list(stride) == _row_major(list(size)) and \
            n_in == n_out and src_meta.contiguous:
        return L.reshape(x, list(size))
    # Autograd writes this for an in-place write into a slice of a tensor that needs
    # gradients (its backward of CopySlices): say what the user wrote, and what to write.
    raise L.unsupported(f"as_strided with size {size}, stride {stride}, offset "
                        f"{storage_offset} (only a row-major reshape of a contiguous tensor). "
                        "An in-place write into a slice of a tensor that needs gradients "
                        "(`h[:, :2] *= 2`, `h.narrow(...).copy_(...)`) makes one; write it "
                        "out of place instead (`torch.cat`, `torch.where`)")


@rule("aten.as_strided_scatter.default")
def as_strided_scatter(L, base, src, size, stride, storage_offset=0):
    """Only the whole-tensor form: src written over all of a row-major base."""
    base_meta = L.trace.meta(L.node.args[0])
    n_base = 1
    for s in base.shape:
        n_base *= s
    n_src = 1
    for s in size:
        n_src *= s
    if (storage_offset or 0) == 0 and list(stride) == _row_major(list(size)) and \
            n_base == n_src and base_meta.contiguous:
        return L.reshape(L.cast(src, base.dtype), base.shape)
    raise L.unsupported(f"as_strided_scatter with size {size}, stride {stride}, offset "
                        f"{storage_offset} (only a whole row-major tensor)")


# ---- backward of views: the gradient placed into zeros of the input's shape

def _place(L, grad, sizes, dim, start, end):
    """zeros(sizes) with grad at [start:end] along dim."""
    n = sizes[dim]
    pieces = []
    for lo, hi in ((0, start), (end, n)):
        if hi > lo:
            shape = list(sizes)
            shape[dim] = hi - lo
            pieces.append((lo, L.const(0, shape, grad.dtype)))
    pieces.append((start, grad))
    pieces.sort(key=lambda p: p[0])
    if len(pieces) == 1:
        return grad
    return L.emit("concat", [p for _, p in pieces], list(sizes), grad.dtype, {"dim": dim})


@rule("aten.slice_backward.default")
def slice_backward(L, grad, input_sizes, dim, start, end, step):
    sizes = list(input_sizes)
    dim %= len(sizes)
    n = sizes[dim]
    start = max(0, min(n, start + n if start < 0 else start))
    end = max(start, min(n, end + n if end < 0 else end))
    if step != 1:  # each gradient element followed by step - 1 zeros, then placed
        k = grad.shape[dim]
        spread = grad.shape[:dim] + [k, step] + grad.shape[dim + 1:]
        col = L.reshape(grad, grad.shape[:dim] + [k, 1] + grad.shape[dim + 1:])
        zeros = L.const(0, grad.shape[:dim] + [k, step - 1] + grad.shape[dim + 1:], grad.dtype)
        rows = L.emit("concat", [col, zeros], spread, grad.dtype, {"dim": dim + 1})
        flat = L.reshape(rows, grad.shape[:dim] + [k * step] + grad.shape[dim + 1:])
        end = min(n, start + k * step)
        grad = slice_(L, flat, dim, 0, end - start)
    return _place(L, grad, sizes, dim, start, end)


@rule("aten.select_backward.default")
def select_backward(L, grad, input_sizes, dim, index):
    sizes = list(input_sizes)
    dim %= len(sizes)
    index %= sizes[dim]
    shape = list(sizes)
    shape[dim] = 1
    return _place(L, L.reshape(grad, shape), sizes, dim, index, index + 1)


# ---- padding, tiling, rotation, reversal

@rule("aten.constant_pad_nd.default")
def constant_pad_nd(L, x, pad, value=0):
    """F.pad: pairs (before, after) from the last dim backwards; negative pads crop."""
    out = L.out_meta()
    v = x
    for i in range(len(pad) // 2):
        dim = len(x.shape) - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        if before < 0 or after < 0:
            v = slice_(L, v, dim, max(0, -before), v.shape[dim] - max(0, -after))
            before, after = max(0, before), max(0, after)
        pieces = []
        for size in (before, None, after):
            if size is None:
                pieces.append(v)
            elif size > 0:
                shape = list(v.shape)
                shape[dim] = size
                pieces.append(L.const(value, shape, x.dtype))
        if len(pieces) > 1:
            shape = list(v.shape)
            shape[dim] = sum(p.shape[dim] for p in pieces)
            v = L.emit("concat", pieces, shape, x.dtype, {"dim": dim})
    return L.reshape(v, out.shape)


@rule("aten.repeat.default")
def repeat(L, x, repeats):
    """Tiles: each dim d becomes [repeats[d], n_d] (the copy index outer), then merged."""
    out = L.out_meta()
    lead = len(repeats) - len(x.shape)
    shape = [1] * lead + list(x.shape)
    v = L.reshape(x, shape)
    split = []
    for r, n in zip(repeats, shape):
        split += [1, n]
    v = L.reshape(v, split)
    tiled = []
    for r, n in zip(repeats, shape):
        tiled += [r, n]
    v = L.expand(v, tiled)
    return L.reshape(v, out.shape)


@rule("aten.roll.default")
def roll(L, x, shifts, dims=()):
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims:  # rolls the flattened tensor
        n = 1
        for s in x.shape:
            n *= s
        return L.reshape(roll(L, L.reshape(x, [n]), shifts, [0]), x.shape)
    v = x
    for shift, dim in zip(shifts, dims):
        dim %= len(x.shape)
        n = x.shape[dim]
        k = shift % n
        if k:
            tail = slice_(L, v, dim, n - k, n)
            head = slice_(L, v, dim, 0, n - k)
            v = L.emit("concat", [tail, head], v.shape, v.dtype, {"dim": dim})
    return v


@rule("aten.flip.default")
def flip(L, x, dims):
    """Reversal along each dim: a gather at positions n - 1 - i."""
    v = x
    for dim in dims:
        dim %= len(x.shape)
        n = x.shape[dim]
        if n == 1:
            continue
        ishape = [1] * len(x.shape)
        ishape[dim] = n
        rev = L.binary("sub", n - 1, L.iota(ishape, dim), "i64", ishape)
        v = L.emit("gather", [v, L.expand(rev, v.shape)], v.shape, v.dtype, {"dim": dim})
    return v


@rule("aten.eye.default", "aten.eye.m")
def eye(L, n, m=None, **kwargs):
    out = L.out_meta()
    rows, cols = out.shape
    hit = L.binary("eq", L.iota([rows, 1], 0), L.iota([1, cols], 1), "bool", [rows, cols])
    return L.cast(hit, out.dtype)
