"""Indexing with tensors: embedding (and its backward as a one-hot matmul), gather,
integer-tensor indexing (`x[rows, cols]`), boolean-mask assignment (`where`), and the
accumulating index_put / scatter_add that their backward ops produce."""
from .core import V, rule


def _count(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _onehot(L, ids, n, dtype):
    """[len(ids), n] with 1 where column == ids[row]: ids flattened."""
    m = _count(ids.shape)
    hit = L.binary("eq", L.reshape(ids, [m, 1]), L.iota([1, n], 1), "bool", [m, n])
    return L.cast(hit, dtype)


@rule("aten.embedding.default")
def embedding(L, table, ids, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    out = L.out_meta()
    return L.emit("embedding", [ids, table], out.shape, out.dtype)


@rule("aten.embedding_dense_backward.default")
def embedding_backward(L, grad, ids, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq:
        raise L.unsupported("scale_grad_by_freq")
    d = grad.shape[-1]
    m = _count(ids.shape)
    onehot = _onehot(L, ids, num_weights, grad.dtype)          # [m, V]
    g = L.reshape(grad, [m, d])
    out = L.emit("matmul", [onehot, g], [num_weights, d], grad.dtype, {"transpose_a": True})
    if padding_idx is not None and padding_idx >= 0:
        pad = L.binary("eq", L.iota([num_weights, 1], 0), padding_idx, "bool", [num_weights, 1])
        out = L.emit("where", [pad, L.tensor(0, grad.dtype), out], out.shape, out.dtype)
    return out


@rule("aten.gather.default")
def gather(L, x, dim, index, sparse_grad=False):
    out = L.out_meta()
    return L.emit("gather", [x, index], out.shape, out.dtype, {"dim": dim % len(x.shape)})


@rule("aten.scatter_add.default")
def scatter_add(L, x, dim, index, src):
    """out = x + sum_k src[..., k] * (index[..., k] == c), along the last dim."""
    if dim % len(x.shape) != len(x.shape) - 1 or index.shape != src.shape:
        raise L.unsupported("scatter_add other than along the last dim with index shaped as src")
    r = len(x.shape)
    c = x.shape[-1]
    k = index.shape[-1]
    lead = index.shape[:-1]
    hit = L.binary("eq", L.reshape(index, lead + [k, 1]), L.iota([1] * (r - 1) + [1, c], r),
                   "bool", lead + [k, c])
    contrib = L.binary("mul", L.cast(hit, x.dtype), L.reshape(src, lead + [k, 1]), x.dtype,
                       lead + [k, c])
    summed = L.reduce("sum", contrib, [r - 1], False)
    return L.binary("add", x, summed, x.dtype, x.shape)


def _int_indices(L, x, indices):
    if any(i is None for i in indices):
        raise L.unsupported("indexing that mixes slices and index tensors")
    if any(isinstance(i, V) and i.dtype == "bool" for i in indices):
        return None
    if len(indices) not in (1, 2) or len(x.shape) != 2:
        raise L.unsupported("integer-tensor indexing other than x[rows] or x[rows, cols] on a "
                            "2-D tensor")
    return indices


@rule("aten.index.Tensor")
def index(L, x, indices):
    idx = _int_indices(L, x, indices)
    if idx is None:
        raise L.error("dynamic-shape", "selecting with a boolean mask (x[mask]) gives a "
                      "value-dependent shape; use torch.where")
    out = L.out_meta()
    if len(idx) == 1:
        return L.emit("embedding", [idx[0], x], out.shape, out.dtype)
    rows, cols = idx
    shape = rows.shape if len(rows.shape) >= len(cols.shape) else cols.shape
    m = _count(shape)
    rows = L.reshape(L.expand(rows, shape), [m])
    cols = L.reshape(L.expand(cols, shape), [m, 1])
    picked_rows = L.emit("embedding", [rows, x], [m, x.shape[1]], x.dtype)
    picked = L.emit("gather", [picked_rows, cols], [m, 1], x.dtype, {"dim": 1})
    return L.reshape(picked, out.shape)


@rule("aten.index_put.default")
def index_put(L, x, indices, values, accumulate=False, unsafe=False):
    out = L.out_meta()
    if len(indices) == 1 and isinstance(indices[0], V) and indices[0].dtype == "bool":
        mask = indices[0]
        mask = L.reshape(mask, mask.shape + [1] * (len(x.shape) - len(mask.shape)))
        mask = L.expand(mask, x.shape)
        v = L.cast(L.tensor(values, x.dtype), x.dtype)
        if v.shape != x.shape and len(v.shape) > 0 and v.shape != [1]:
            raise L.unsupported("boolean-mask assignment of a tensor of values (assign a scalar, "
                                "or use torch.where)")
        new = L.binary("add", x, v, x.dtype, x.shape) if accumulate else v
        return L.emit("where", [mask, new, x], out.shape, out.dtype)
    idx = _int_indices(L, x, indices)
    if not accumulate:
        raise L.unsupported("assignment through integer indices (x[idx] = v); only the "
                            "accumulating form that backward uses is supported")
    # x + onehot(rows)^T @ (values per row, placed at cols)
    n, c = x.shape
    if len(idx) == 1:
        ids = idx[0]
        m = _count(ids.shape)
        vals = L.reshape(L.expand(values, ids.shape + [c]), [m, c])
        add = L.emit("matmul", [_onehot(L, ids, n, x.dtype), vals], [n, c], x.dtype,
                     {"transpose_a": True})
        return L.binary("add", x, add, x.dtype, x.shape)
    rows, cols = idx
    shape = rows.shape if len(rows.shape) >= len(cols.shape) else cols.shape
    m = _count(shape)
    rows = L.expand(rows, shape)
    cols = L.expand(cols, shape)
    vals = L.reshape(L.expand(L.tensor(values, x.dtype), shape), [m, 1])
    placed = L.binary("mul", _onehot(L, cols, c, x.dtype), vals, x.dtype, [m, c])  # [m, c]
    add = L.emit("matmul", [_onehot(L, rows, n, x.dtype), placed], [n, c], x.dtype,
                 {"transpose_a": True})
    return L.binary("add", x, add, x.dtype, x.shape)


def _to_front(L, x, dim):
    """x with dim moved first and the rest flattened: ([n, rest], perm, moved shape)."""
    dim %= len(x.shape)
    perm = [dim] + [d for d in range(len(x.shape)) if d != dim]
    moved = x if dim == 0 else L.emit("transpose", [x], [x.shape[p] for p in perm], x.dtype,
                                      {"perm": perm})
    rest = _count(moved.shape[1:])
    return L.reshape(moved, [moved.shape[0], rest]), perm, moved.shape


def _from_front(L, flat, perm, moved_shape, dtype):
    v = L.reshape(flat, moved_shape)
    if perm == sorted(perm):
        return v
    inverse = [perm.index(d) for d in range(len(perm))]
    return L.emit("transpose", [v], [moved_shape[i] for i in inverse], dtype, {"perm": inverse})


@rule("aten.index_select.default")
def index_select(L, x, dim, index):
    """Rows of x along dim: an embedding lookup of the dim-first view."""
    table, perm, moved = _to_front(L, x, dim)
    k = _count(index.shape)
    picked = L.emit("embedding", [L.reshape(index, [k]), table], [k, table.shape[1]], x.dtype)
    return _from_front(L, picked, perm, [k] + moved[1:], x.dtype)


@rule("aten.index_add.default")
def index_add(L, x, dim, index, source, alpha=1):
    """x + alpha * onehot(index)^T @ source, along dim (index_select's backward)."""
    base, perm, moved = _to_front(L, x, dim)
    src, _, _ = _to_front(L, L.cast(source, x.dtype), dim)
    k = _count(index.shape)
    onehot = _onehot(L, L.reshape(index, [k]), base.shape[0], x.dtype)  # [k, n]
    added = L.emit("matmul", [onehot, src], base.shape, x.dtype, {"transpose_a": True})
    total = L.binary("add", base, L.scale(added, alpha), x.dtype, base.shape)
    return _from_front(L, total, perm, moved, x.dtype)
