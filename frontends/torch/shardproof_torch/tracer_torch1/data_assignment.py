"""`p.data = new` inside a traced step, made a traced in-place copy.

torch 1.13's make_fx keys each tensor's proxy by the tensor object, and `.data =` swaps the
storage under the object without an op the trace sees: the parameter keeps the proxy of its
input value, the plan says it was left as it was, and any bug in the update passed (hand SGD
by `p.data = p.data - lr * p.grad`, and `torch.nn.utils.vector_to_parameters`, which assigns
`.data`, were proven equivalent without their DDP average). While a program is traced, an
assignment of a tensor of the same shape and dtype is `with torch.no_grad(): p.copy_(new)`,
the same values in the same tensor; any other is exit 2 (a ZeRO-3 style swap of a shard for
the gathered whole cannot be followed)."""
import contextlib

import torch

from ..errors import CaptureError
from .source import user_src

_BASE = torch._C._TensorBase.data


def _get(self):
    return _BASE.__get__(self)


def _set(self, value):
    if isinstance(value, torch.Tensor) and list(value.shape) == list(self.shape) and \
            value.dtype == self.dtype:
        with torch.no_grad():
            self.copy_(value)
        return
    src = user_src(2)
    shape = list(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
    raise CaptureError("data-assignment", f"`.data =` replaces a tensor of shape "
                       f"{list(self.shape)} ({self.dtype}) with {shape}"
                       f"{'' if not isinstance(value, torch.Tensor) else f' ({value.dtype})'}: "
                       "the capture follows an assignment of the same shape and dtype only; "
                       "update the tensor in place (`with torch.no_grad(): p.copy_(...)`)",
                       src and src["file"], src and src["line"])


@contextlib.contextmanager
def traced():
    """While installed, `t.data = v` is a traced copy (or exit 2)."""
    had = "data" in torch.Tensor.__dict__
    saved = torch.Tensor.__dict__.get("data")
    torch.Tensor.data = property(_get, _set)
    try:
        yield
    finally:
        if had:
            torch.Tensor.data = saved
        else:
            del torch.Tensor.data
