"""Loads a harness file and checks the contract of docs/torch-harness.md, so that a broken
harness is a `file:line: [rule]` message, never a traceback."""
import ast
import importlib.util
import os
import sys
import traceback

from .errors import CaptureError, relpath

REQUIRED = ["MESH", "build_logical", "build_rank", "batch", "BATCH_LAYOUT", "loss", "optimizer"]
OPTIONAL_FUNCTIONS = ["finalize_grads", "train_step", "param_layout"]
CALLABLE = {"build_logical", "build_rank", "batch", "loss", "optimizer"} | set(OPTIONAL_FUNCTIONS)


class Harness:
    def __init__(self, path, module, def_lines):
        self.path = path
        self.file = relpath(path)
        self.module = module
        self.def_lines = def_lines  # top-level name -> line
        self.used = False  # has a program been captured on this instance (fresh())

    def __getattr__(self, name):
        return getattr(self.module, name, None)

    def line_of(self, name):
        return self.def_lines.get(name, 1)

    def error(self, rule, text, name=None, line=None):
        return CaptureError(rule, text, self.file, line or (self.line_of(name) if name else 1))


def top_level_lines(source):
    lines = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            lines[node.name] = node.lineno
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    lines[t.id] = node.lineno
    return lines


def user_frame_of(tb, path):
    """(file, line) of the innermost traceback frame in the user's own code."""
    from .tracer_torch1.source import is_user_file
    best = (relpath(path), 1)
    for frame, line in traceback.walk_tb(tb):
        if is_user_file(frame.f_code.co_filename):
            best = (relpath(frame.f_code.co_filename), line)
    return best


def load(path):
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise CaptureError("harness-file", f"no harness file at {path}")
    with open(path, encoding="utf-8") as f:
        source = f.read()
    try:
        def_lines = top_level_lines(source)
    except SyntaxError as e:
        raise CaptureError("harness-syntax", f"not valid Python: {e.msg}", relpath(path), e.lineno)
    sys.path.insert(0, os.path.dirname(path))
    before = set(sys.modules)
    name = "shardproof_harness_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except CaptureError:
        _forget(before, path)
        raise
    except ImportError as e:
        _forget(before, path)
        file, line = user_frame_of(e.__traceback__, path)
        missing = getattr(e, "name", None) or str(e)
        if missing and missing.split(".")[0] == "torch":
            raise CaptureError("torch-missing", f"importing the harness failed: {e}: "
                               f"{sys.executable} cannot import torch; install python3-torch "
                               "(scripts/setup.sh) or set SHARDPROOF_PYTHON to an interpreter "
                               "that has it", file, line)
        raise CaptureError("harness-import", f"importing the harness failed: {e}", file, line)
    except Exception as e:
        _forget(before, path)
        file, line = user_frame_of(e.__traceback__, path)
        raise CaptureError("harness-import", f"importing the harness raised {type(e).__name__}: {e}",
                           file, line)
    h = Harness(path, module, def_lines)
    h.own_modules = [m for m in set(sys.modules) - before
                     if _is_user_module(sys.modules.get(m))]
    validate(h)
    return h


def fresh(h):
    """The harness loaded again, with the user modules it imports executed again: a program
    is captured as its rank's own process would run it, from fresh module state. A harness
    or model module that keeps state between builds (a process group created once and cached
    in a global, Megatron's `parallel_state`) would otherwise hand one program's state to the
    next (the logical program's one-rank group to a rank, rank 0's groups to rank 1).
    The first program a process captures takes `h` itself, untouched by any program so far
    (the second process is forked before its first program): a harness is executed again only
    when a program has run on it."""
    if not h.used:
        h.used = True
        return h
    unload(h)
    sys.modules.pop(h.module.__name__, None)
    again = load(h.path)
    again.used = True
    return again


def names_axis(h, axis):
    """Whether the harness, or a module of the user's it imported, names `axis` as a string
    (ctx.groups["pp"], BATCH_LAYOUT, a param_layout): `--mesh` may add only axes the
    harness knows (the contract); a typo such as `tpp=4` would otherwise verify a mesh
    that replicates every rank four times without a word. `tp` is known to every
    harness: Megatron's attributes split along it."""
    if axis == "tp":
        return True
    files = [h.path] + [sys.modules[m].__file__ for m in getattr(h, "own_modules", [])
                        if _is_user_module(sys.modules.get(m))]
    quoted = (f'"{axis}"', f"'{axis}'")
    for f in filter(None, files):
        try:
            with open(f, encoding="utf-8", errors="replace") as src:
                text = src.read()
        except OSError:
            continue
        if any(q in text for q in quoted):
            return True
    return False


def _is_user_module(m):
    from .tracer_torch1.source import is_user_file
    return m is not None and is_user_file(getattr(m, "__file__", None) or "")


def unload(h):
    """Forgets the harness and the user modules it imported, so that another harness in the
    same process (tests) imports its own `model.py`."""
    for m in getattr(h, "own_modules", []):
        sys.modules.pop(m, None)
    d = os.path.dirname(h.path)
    if d in sys.path:
        sys.path.remove(d)


def _forget(before, path):
    for m in set(sys.modules) - before:
        if _is_user_module(sys.modules.get(m)):
            sys.modules.pop(m, None)
    if os.path.dirname(path) in sys.path:
        sys.path.remove(os.path.dirname(path))


def validate(h):
    for name in REQUIRED:
        if not hasattr(h.module, name):
            raise h.error("harness-missing", f"the harness defines no `{name}` (required, see "
                          "docs/torch-harness.md)")
    for name in CALLABLE:
        if hasattr(h.module, name) and not callable(getattr(h.module, name)):
            raise h.error("harness-type", f"`{name}` must be a function", name)
    mesh = h.MESH
    if not isinstance(mesh, dict) or not mesh or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 1
            for k, v in mesh.items()):
        raise h.error("harness-mesh", "MESH must be a non-empty dict of axis name -> size >= 1, "
                      f"got {mesh!r}", "MESH")
    layout = h.BATCH_LAYOUT
    if not isinstance(layout, dict) or not all(
            isinstance(k, str) and isinstance(v, dict) and all(
                isinstance(a, str) and isinstance(d, int) for a, d in v.items())
            for k, v in layout.items()):
        raise h.error("batch-layout", "BATCH_LAYOUT must be a dict of batch key -> {axis: dim}",
                      "BATCH_LAYOUT")


def check_batch(h, batch, mesh):
    """Every batch key has a layout, every layout names a mesh axis and a dim that the
    axis size divides."""
    import torch  # the caller has imported torch already
    if not isinstance(batch, dict) or not all(isinstance(v, torch.Tensor) for v in batch.values()):
        raise h.error("batch", "batch() must return a dict of str -> Tensor", "batch")
    for key, t in batch.items():
        if key not in h.BATCH_LAYOUT:
            raise h.error("batch-layout", f"batch key {key!r} has no entry in BATCH_LAYOUT "
                          "(write {} to replicate it)", "BATCH_LAYOUT")
        for axis, dim in h.BATCH_LAYOUT[key].items():
            if axis not in mesh.sizes:
                raise h.error("batch-layout", f"BATCH_LAYOUT[{key!r}] names axis {axis!r}, not "
                              f"in the mesh {mesh.names}", "BATCH_LAYOUT")
            if not -t.dim() <= dim < t.dim():
                raise h.error("batch-layout", f"BATCH_LAYOUT[{key!r}]: dim {dim} out of range for "
                              f"shape {list(t.shape)}", "BATCH_LAYOUT")
    for key in h.BATCH_LAYOUT:
        if key not in batch:
            raise h.error("batch-layout", f"BATCH_LAYOUT names {key!r}, which batch() does not "
                          "return", "BATCH_LAYOUT")
    for key, t in batch.items():
        dims = {}
        for axis, dim in h.BATCH_LAYOUT[key].items():
            dims.setdefault(dim % t.dim(), []).append(axis)
        for dim, axes in dims.items():
            n = 1
            for a in axes:
                n *= mesh.sizes[a]
            if t.shape[dim] % n:
                raise h.error("batch-layout", f"batch key {key!r}: dim {dim} of size "
                              f"{t.shape[dim]} is not divisible into {n} equal chunks "
                              f"({'x'.join(axes)})", "BATCH_LAYOUT")


def batch_slice(h, key, shape, mesh, coords):
    """[(lo, hi)] per dim of the chunk of batch key `key` at `coords`. Several axes on one
    dim nest in mesh order (the first axis is the outer chunk)."""
    box = [[0, n] for n in shape]
    for axis in mesh.names:
        if axis in h.BATCH_LAYOUT[key]:
            d = h.BATCH_LAYOUT[key][axis] % len(shape)
            lo, hi = box[d]
            step = (hi - lo) // mesh.sizes[axis]
            box[d] = [lo + coords[axis] * step, lo + (coords[axis] + 1) * step]
    return box
