"""Sources for the ATen ops autograd runs in backward. They run under the autograd engine with
no user frame on the stack, so without help they all fall back to the step's `loss` line, and
a missing backward collective is reported there. With this, each one gets the line of the
forward op it differentiates: anomaly mode keeps, per autograd node, what
torch.fx.traceback.format_stack() returns when the node is made (made cheap here: the user's
innermost frame), and a pre-hook on each node makes that the current backward source while
the engine runs it (functorch's aot_autograd uses the same two hooks)."""
import contextlib
import warnings

import torch
import torch.fx.traceback as fx_traceback

from .source import user_src


class BackwardSource:
    current = None  # the forward source of the autograd node running now, or None


def _autograd_nodes(roots):
    seen, stack = set(), [r for r in roots if r is not None]
    seen.update(stack)
    while stack:
        node = stack.pop()
        yield node
        for fn, _ in node.next_functions:
            if fn is not None and fn not in seen:
                seen.add(fn)
                stack.append(fn)


class _Frame(str):
    """A user frame as anomaly mode stores it: text (the engine joins the stored stack into
    its message when a backward op raises) that keeps its source dict for the pre-hook."""

    def __new__(cls, src):
        text = f'  File "{src["file"]}", line {src["line"]}, in {src["function"]}\n' if src \
            else ""
        frame = super().__new__(cls, text)
        frame.src = src
        return frame


def _set_current(frame):
    src = getattr(frame, "src", None)

    def prehook(grad_outputs):
        BackwardSource.current = src
    return prehook


@contextlib.contextmanager
def recording():
    """Within it, every backward() tags its ATen ops with their forward op's source."""
    saved_format, saved_backward = fx_traceback.format_stack, torch.autograd.backward

    def backward(tensors, *args, **kwargs):
        roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
        for node in _autograd_nodes([t.grad_fn for t in roots]):
            node.register_prehook(_set_current(node.metadata.get("traceback_", [None])[0]))
        try:
            return saved_backward(tensors, *args, **kwargs)
        finally:
            BackwardSource.current = None

    fx_traceback.format_stack = lambda: [_Frame(user_src(2))]
    torch.autograd.backward = backward
    try:
        with torch.autograd.set_detect_anomaly(True, check_nan=False), \
                warnings.catch_warnings():
            # anomaly mode's own report of a backward op that raised: the error is reported
            warnings.filterwarnings("ignore", message="Error detected in")
            yield
    finally:
        fx_traceback.format_stack, torch.autograd.backward = saved_format, saved_backward
        BackwardSource.current = None
