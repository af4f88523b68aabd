"""Where each rank's parameters and batch chunks sit in the logical ones: the layouts of
docs/torch-harness.md ("What is proved, and how parameters relate") as lists of
(rank-local range, logical box) blocks."""
from .errors import CaptureError


def megatron_layout(param):
    if not getattr(param, "tensor_model_parallel", False):
        return None
    return {"axis": "tp", "dim": int(getattr(param, "partition_dim", 0)),
            "stride": int(getattr(param, "partition_stride", 1))}


def layout_of(h, name, param, ctx, kind):
    """The layout dict of one rank parameter/buffer, or None (a full replica)."""
    if h.param_layout is not None:
        layout = h.param_layout(name, param, ctx)
        if layout is not None:
            if not isinstance(layout, dict) or "axis" not in layout or "dim" not in layout or \
                    set(layout) - {"axis", "dim", "stride"}:
                raise h.error("param-layout", f"param_layout({name!r}) must return None or "
                              "{'axis': str, 'dim': int, 'stride': int}", "param_layout")
            if layout["axis"] not in ctx.mesh:
                # an unknown axis would count as size 1: the parameter a full replica
                raise h.error("param-layout", f"param_layout({name!r}) names the axis "
                              f"{layout['axis']!r}, which the mesh ({', '.join(ctx.mesh)}) "
                              "does not have", "param_layout")
            return layout
    return megatron_layout(param) if kind == "param" else None


def blocks(h, name, layout, local_shape, logical_shape, mesh, coords):
    """[(dim, local_lo, local_hi, logical_box)]: the pieces of the rank tensor, each a box of
    the logical tensor. A replica is one block covering everything."""
    full = [[0, n] for n in logical_shape]
    if layout is None:
        if list(local_shape) != list(logical_shape):
            raise h.error("param-layout", f"{name}: rank shape {list(local_shape)} differs from "
                          f"the logical {list(logical_shape)} but no layout says how it is split "
                          "(Megatron attributes or param_layout)", "build_rank")
        return [(0, 0, local_shape[0] if local_shape else 0, full)]
    axis, dim, stride = layout["axis"], layout["dim"], int(layout.get("stride", 1))
    n = mesh.sizes.get(axis, 1)
    c = coords.get(axis, 0)
    dim %= len(logical_shape)
    size = logical_shape[dim]
    if size % (n * stride):
        into = f"{n} equal pieces" if stride == 1 else f"{stride} blocks of {n} pieces each"
        raise h.error("param-layout", f"{name}: dim {dim} of size {size} does not split into "
                      f"{into} along {axis!r}", "build_rank")
    piece = size // (n * stride)
    expected = list(logical_shape)
    expected[dim] = piece * stride
    if list(local_shape) != expected:
        raise h.error("param-layout", f"{name}: rank {mesh.rank_of(coords)} holds shape "
                      f"{list(local_shape)}, its layout ({axis}, dim {dim}, stride {stride}) "
                      f"needs {expected}", "build_rank")
    out = []
    block = size // stride
    for s in range(stride):
        box = [list(r) for r in full]
        lo = s * block + c * piece
        box[dim] = [lo, lo + piece]
        out.append((dim, s * piece, (s + 1) * piece, box))
    return out


def check_names(h, logical_params, rank_params, rank):
    for name in rank_params:
        if name not in logical_params:
            raise CaptureError("param-name", f"rank {rank} has parameter {name!r}, which the "
                               "logical model does not have (parameters pair by "
                               "named_parameters() name)", h.file, h.line_of("build_rank"))
    return set(rank_params)
