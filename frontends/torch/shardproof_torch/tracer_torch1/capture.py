"""Captures one program (the logical step, or one rank's step) as a neutral Trace.

Pass 1: make_fx over fake tensors traces forward, backward and optimizer step into one
ATen graph; the model's own Parameter objects are the graph's inputs, so in-place updates
land on placeholders. Pass 2: functionalize re-runs that graph and removes every mutation
and view; an updated parameter is the value copied back into its placeholder at the end.
(torch 1.13 refuses autograd inside functionalize, hence two passes.)"""
import contextlib
import operator

import torch
import torch.fx
from torch._subclasses import fake_tensor as fake_mod
from torch.fx.experimental import proxy_tensor
from torch.fx.experimental.proxy_tensor import make_fx
from functorch import functionalize

from ..errors import CaptureError
from ..trace import Input, Node, Ref, TensorMeta, Trace
from .backward_sources import BackwardSource
from .backward_sources import recording as recording_backward_sources
from .fake_dist import FakeDistributed
from ..rank_environ import rank_environment
from . import data_assignment, decompositions, fake_mode as fake_mode_mod, speedups, untracked
from .library import ops
from .optimizers import marking, whole_steps
from .source import capture_boundary, is_user_file, user_src

DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
          torch.float64: "f64", torch.int32: "i32", torch.int64: "i64", torch.bool: "bool"}


class _SourceState:
    current = None   # pass 2: the pass-1 node being re-run
    fallback = None  # pass 1: where ops with no user frame on the stack come from


@contextlib.contextmanager
def recording_sources():
    """Every node make_fx creates gets meta["sp_src"]: the pass-1 node's source in pass 2,
    else the innermost user frame, else (an ATen backward op) its forward op's source
    (backward_sources.py), else the phase's fallback."""
    tracer_cls = proxy_tensor.PythonKeyTracer
    original = tracer_cls.create_node

    def create_node(self, *args, **kwargs):
        node = original(self, *args, **kwargs)
        if _SourceState.current is not None:
            node.meta["sp_src"] = _SourceState.current
        else:
            node.meta["sp_src"] = user_src(2) or BackwardSource.current or \
                _SourceState.fallback
        return node

    tracer_cls.create_node = create_node
    try:
        yield
    finally:
        tracer_cls.create_node = original


class _SourceInterpreter(torch.fx.Interpreter):
    def run_node(self, n):
        _SourceState.current = n.meta.get("sp_src")
        try:
            return super().run_node(n)
        finally:
            _SourceState.current = None


@contextlib.contextmanager
def cpu_only():
    """`.cuda()` is mapped to the CPU: fake tensors need no device."""
    saved = (torch.Tensor.cuda, torch.nn.Module.cuda)
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.nn.Module.cuda = lambda self, *a, **k: self
    try:
        yield
    finally:
        torch.Tensor.cuda, torch.nn.Module.cuda = saved


def fake_mode():
    """The mode programs are captured in (fake_mode.py)."""
    fake_mode_mod.register_kernels()
    return fake_mode_mod.make()


def dtype_name(dtype, src=None):
    if dtype not in DTYPES:
        raise CaptureError("dtype", f"dtype {dtype} has no plan dtype (f32 f16 bf16 f64 i32 i64 "
                           "bool)", src and src["file"], src and src["line"])
    return DTYPES[dtype]


def translate_error(e, harness_file):
    """An exception raised while running user code -> CaptureError at the user's line."""
    if isinstance(e, CaptureError):
        return e
    import traceback
    where = None
    for frame, line in traceback.walk_tb(e.__traceback__):
        if is_user_file(frame.f_code.co_filename):
            where = (frame.f_code.co_filename, line)
    from ..errors import relpath
    file, line = (relpath(where[0]), where[1]) if where else (harness_file, 1)
    text = str(e).split("\n")[0]
    if isinstance(e, fake_mod.DataDependentOutputException) or "_local_scalar_dense" in text \
            or "get value out of a tracing tensor" in text:
        return CaptureError("data-dependent", "Python control flow or .item() on a tensor's "
                            "value cannot be captured (values are symbolic); use torch.where or "
                            "torch.clamp", file, line)
    if isinstance(e, fake_mod.DynamicOutputShapeException):
        return CaptureError("dynamic-shape", f"an op whose output shape depends on values "
                            f"({text}) cannot be captured", file, line)
    return CaptureError("capture", f"running the program raised {type(e).__name__}: {text}",
                        file, line)


@capture_boundary
def capture_program(h, ctx, logical, fake_mode, batch_chunk, default_step_lines):
    """Runs the harness's step for `ctx` and returns (Trace, model). `batch_chunk` maps
    batch keys to this program's (fake) chunks."""
    ops()  # define the library before tracing
    fd = FakeDistributed(ctx)
    with fd.installed(), cpu_only(), whole_steps(), decompositions.installed(), \
            speedups.installed(), untracked.refused(), rank_environment(ctx):
        try:
            with fake_mode:
                model = h.build_logical() if logical else h.build_rank(ctx)
                if not isinstance(model, torch.nn.Module):
                    raise h.error("harness-type", "build_rank/build_logical must return a "
                                  "torch.nn.Module", "build_rank")
                params = dict(model.named_parameters())
                buffers = {k: b for k, b in model.named_buffers() if b is not None}
                opt = h.optimizer(list(params.values()))
                if not isinstance(opt, torch.optim.Optimizer):
                    raise h.error("harness-type", "optimizer(params) must return a "
                                  f"torch.optim.Optimizer, got {type(opt).__name__}",
                                  "optimizer")
        except Exception as e:
            raise translate_error(e, h.file)

        names = list(params) + list(buffers) + list(batch_chunk)
        kinds = ["param"] * len(params) + ["buffer"] * len(buffers) + ["batch"] * len(batch_chunk)
        args = list(params.values()) + list(buffers.values()) + list(batch_chunk.values())
        param_list = list(params.values())

        def mark_grads():
            for i, p in enumerate(param_list):
                if p.grad is not None:
                    p.grad = ops().mark_grad(p.grad, i)

        def step(*flat):
            b = dict(zip(batch_chunk, flat[len(params) + len(buffers):]))
            if h.train_step is not None:
                with marking(param_list):
                    h.train_step(model, b, opt, ctx)
                return
            opt.zero_grad()
            _SourceState.fallback = default_step_lines["loss"]
            out = h.loss(model, b)
            if not isinstance(out, torch.Tensor) or out.dim() != 0:
                raise h.error("harness-type", "loss() must return a scalar tensor", "loss")
            out.backward()
            if h.finalize_grads is not None:
                _SourceState.fallback = default_step_lines["finalize_grads"]
                h.finalize_grads(model, ctx)
            mark_grads()
            _SourceState.fallback = default_step_lines["optimizer"]
            opt.step()

        with recording_sources():
            try:
                with fake_mode, recording_backward_sources(), data_assignment.traced():
                    g1 = make_fx(step)(*args)
                    _same_parameters(h, params, model)
                    plain = [a.detach() for a in args]
                    g2 = make_fx(functionalize(_SourceInterpreter(g1).run))(*plain)
            except Exception as e:
                e = translate_error(e, h.file)
                if not e.file and _SourceState.fallback:  # raised outside the user's frames
                    e.file, e.line = _SourceState.fallback["file"], _SourceState.fallback["line"]
                raise e
            finally:
                _SourceState.fallback = None
    trace = to_trace(g2, names, kinds)
    trace.groups = [g.descriptor() for g in ctx.groups_table]
    trace.read_axes = sorted(ctx.log.axes)
    return trace, model


def _same_parameters(h, before, model):
    """The step updates the parameters it was given, in place: a parameter replaced by a new
    tensor (`setattr(model, name, nn.Parameter(...))`) is not the traced input, and its new
    value would never reach the plan (it would say the parameter was left as it was)."""
    after = dict(model.named_parameters())
    for name, p in before.items():
        if after.get(name) is not p:
            raise h.error("param-replaced", f"the step replaced parameter {name!r} with a new "
                          "tensor; update it in place (an optimizer, or `with torch.no_grad(): "
                          "p.copy_(...)`)", "train_step" if h.train_step else "optimizer")
    for name in after:
        if name not in before:
            raise h.error("param-replaced", f"the step added parameter {name!r}; parameters "
                          "are made by build_rank/build_logical", "train_step"
                          if h.train_step else "optimizer")


def _convert_arg(a, refs):
    if isinstance(a, torch.fx.Node):
        return refs[a]
    if isinstance(a, (list, tuple)):
        return [_convert_arg(x, refs) for x in a]
    if isinstance(a, torch.dtype):
        return "dtype:" + DTYPES.get(a, str(a))
    if isinstance(a, (torch.device, torch.layout, torch.memory_format)):
        return None
    if isinstance(a, (bool, int, float, str)) or a is None:
        return a
    return repr(a)


def _meta_of(v):
    """TensorMeta of a FakeTensor (meta "val") or TensorMetadata (meta "tensor_meta")."""
    if v is None or not hasattr(v, "shape") or not hasattr(v, "dtype"):
        return None
    # an unsupported dtype is an error only where the lowering meets it (live ops)
    contiguous = None
    if isinstance(v, torch.Tensor):
        contiguous = v.is_contiguous() and v.storage_offset() == 0
    elif hasattr(v, "stride"):
        contiguous = tuple(v.stride) == _row_major(list(v.shape))
    return TensorMeta(list(v.shape), DTYPES.get(v.dtype, f"unsupported:{v.dtype}"), contiguous)


def _row_major(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def _metas(n):
    val = n.meta.get("val", n.meta.get("tensor_meta"))
    vals = val if isinstance(val, (list, tuple)) and not hasattr(val, "shape") else [val]
    return [_meta_of(v) for v in vals]


MAX_CONSTANT_RUNS = 256


def _constant_value(t, src):
    """A tensor constant of the program: one value when its elements are all equal, else
    its elements in row-major order (written as runs of equal values, so only small or
    piecewise-constant tensors such as `torch.tensor([0, 2])` are accepted)."""
    if isinstance(t, fake_mod.FakeTensor):
        t = getattr(t, "constant", None)
    if isinstance(t, torch.Tensor) and t.numel() > 0:
        flat = t.reshape(-1)
        first = flat[0].item()
        if bool((flat == flat[0]).all()):
            return first
        runs = int((flat[1:] != flat[:-1]).sum().item()) + 1
        if runs <= MAX_CONSTANT_RUNS:
            return flat.tolist()
    raise CaptureError("constant-tensor", "a tensor constant with many differing elements (e.g. "
                       "torch.tensor([...]) inside the step) cannot be written as a plan const; "
                       "pass it in the batch", src and src["file"], src and src["line"])


def to_trace(gm, names, kinds):
    trace = Trace()
    refs = {}
    placeholders = []
    step_marks = {}  # parameter name -> gradients read by whole optimizer steps
    step_grads = {}  # parameter name -> its gradient as the default step's optimizer reads it
    for n in gm.graph.nodes:
        src = n.meta.get("sp_src")
        if n.op == "placeholder":
            i = len(placeholders)
            placeholders.append(n)
            node = Node(len(trace.nodes), "input", [], {}, _metas(n), src)
            trace.nodes.append(node)
            trace.inputs.append(Input(node.id, kinds[i], names[i]))
            refs[n] = Ref(node.id)
        elif n.op == "call_function":
            if n.target is operator.getitem:
                base, index = n.args
                refs[n] = Ref(refs[base].node, index)
                outs = trace.nodes[refs[base].node].outs
                while len(outs) <= index:
                    outs.append(None)
                if outs[index] is None:  # real mode: only the getitem node has the meta
                    outs[index] = _meta_of(n.meta.get("val", n.meta.get("tensor_meta")))
                continue
            op = str(n.target)
            if op == "aten.copy_.default" and n.args[0] in placeholders:
                i = placeholders.index(n.args[0])
                if kinds[i] == "param":
                    trace.updated[names[i]] = refs[n.args[1]]
                    continue
                if kinds[i] == "buffer":
                    raise CaptureError("buffer-update", f"the step updates buffer {names[i]!r} in "
                                       "place; only parameters may change in v1",
                                       src and src["file"], src and src["line"])
            args = [_convert_arg(a, refs) for a in n.args]
            kwargs = {k: _convert_arg(v, refs) for k, v in n.kwargs.items()}
            node = Node(len(trace.nodes), op, args, kwargs, _metas(n), src)
            trace.nodes.append(node)
            refs[n] = Ref(node.id)
            if op == "shardproof.mark_grad.default":
                step_grads[names[args[1]]] = Ref(node.id)
            elif op == "shardproof.mark_step_grad.default":
                step_marks.setdefault(names[args[1]], []).append(Ref(node.id))
        elif n.op == "get_attr":
            tensor = getattr(gm, n.target)
            value = _constant_value(tensor, src)
            node = Node(len(trace.nodes), "shardproof.constant", [value], {}, [_meta_of(tensor)],
                        src)
            trace.nodes.append(node)
            refs[n] = Ref(node.id)
        elif n.op == "output":
            outs = n.args[0] if isinstance(n.args[0], (list, tuple)) else [n.args[0]]
            trace.results = [refs[o] for o in outs if isinstance(o, torch.fx.Node)]
        else:
            raise CaptureError("capture", f"unexpected graph node {n.op} {n.target}")
    for i, n in enumerate(placeholders):
        if kinds[i] == "param" and names[i] not in trace.updated:
            trace.updated[names[i]] = refs[n]
    for name, mark in step_grads.items():
        if _stepped_whole_from(trace, name, mark):
            trace.grads[name] = mark
    _claim_step_grads(trace, step_marks)
    return trace


STEP_OPS = ("shardproof.sgd_step.default", "shardproof.adam_step.default")


def _stepped_whole_from(trace, name, grad):
    """Whether parameter `name`'s final value is one whole optimizer step (SGD, Adam, AdamW)
    that reads `grad`. Only then does the update determine the gradient, so that claiming the
    gradient proves no more than the contract asks (the updated parameters): an optimizer
    traced through may not (Rprop's first step is -lr * sign(g): a gradient summed where it
    should be averaged updates the same)."""
    final = trace.updated.get(name)
    node = trace.nodes[final.node] if final is not None else None
    return node is not None and final.index == 0 and node.op in STEP_OPS and \
        node.args[1] == grad


def _claim_step_grads(trace, step_marks):
    """In a train_step, a gradient read by a whole optimizer step is claimed only if the
    parameter was stepped once and that step's result is its final value (a step whose result
    is overwritten, say by a ZeRO all-gather, says nothing about the gradient)."""
    for name, marks in step_marks.items():
        if len(marks) != 1 or name in trace.grads:
            continue
        if _stepped_whole_from(trace, name, marks[0]):
            trace.grads[name] = marks[0]


@capture_boundary
def trace_function(fn, inputs, fake=False):
    """Traces fn(*inputs) on real tensors (both passes) for fidelity tests: inputs are
    batch inputs named in0, in1, ...; trace.results are fn's returned tensors. `fake`: on
    fake tensors in the capture's mode instead, as a harness's program is traced."""
    ops()
    mode = fake_mode() if fake else contextlib.nullcontext()
    if fake:
        inputs = [mode.from_tensor(i) for i in inputs]
    with recording_sources(), decompositions.installed(), speedups.installed(), mode:
        g1 = make_fx(fn)(*inputs)
        g2 = make_fx(functionalize(_SourceInterpreter(g1).run))(*[i.detach() for i in inputs])
    names = [f"in{i}" for i in range(len(inputs))]
    return to_trace(g2, names, ["batch"] * len(inputs))
