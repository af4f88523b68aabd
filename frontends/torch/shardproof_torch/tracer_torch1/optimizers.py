"""torch.optim.SGD / Adam / AdamW as single graph nodes: their first step from zero state
is exactly the plan's `sgd` / `adam` (the lowering says how), and capturing them whole
avoids Adam's `step.item()`, which no fake tensor can answer.

While a program is captured, the classes' own `step` is replaced (`whole_steps()`), so every
such optimizer is captured whole wherever it is built: the one `optimizer(params)` returns,
and the ones a `train_step` builds over shards of its own (ZeRO). A subclass that defines its
own `step` keeps it. `foreach`, `capturable`, `differentiable` do not change the first step.
Other optimizers are traced through like user code."""
import contextlib
import weakref

import torch

from ..errors import CaptureError
from .library import ops
from .source import user_src


def _scalar(group, key, name):
    v = group[key]
    if isinstance(v, torch.Tensor):
        src = user_src(3)
        raise CaptureError("optimizer", f"{name}: a tensor {key} is not supported; use a number",
                           src and src["file"], src and src["line"])
    return float(v)


def _sgd_step(group, p, g):
    return ops().sgd_step(p, g, _scalar(group, "lr", "SGD"),
                          _scalar(group, "momentum", "SGD"),
                          _scalar(group, "weight_decay", "SGD"),
                          bool(group.get("nesterov", False)), bool(group.get("maximize", False)))


def _adam_step(decoupled):
    def step(group, p, g):
        beta1, beta2 = group["betas"]
        return ops().adam_step(p, g, _scalar(group, "lr", "Adam"), float(beta1),
                               float(beta2), _scalar(group, "eps", "Adam"),
                               _scalar(group, "weight_decay", "Adam"), decoupled,
                               bool(group.get("maximize", False)))
    return step


STEPS = {torch.optim.SGD: _sgd_step, torch.optim.Adam: _adam_step(False),
         torch.optim.AdamW: _adam_step(True)}


class _Marks:
    """Which tensors are the model's parameters (id -> index into the program's parameter
    list) while a train_step runs: a whole step of one of them marks the gradient it reads
    (a gradient claim, kept only if that step's result is the parameter's final value)."""
    index = None


def _base_of(opt):
    for cls in type(opt).__mro__:
        if cls in STEPS:
            return cls
    return None


def _stateless(opt):
    return type(opt) is torch.optim.SGD and all(g["momentum"] == 0 for g in opt.param_groups)


_COUNTS = weakref.WeakKeyDictionary()  # optimizer -> steps taken in this program


def _whole_step(self, closure=None):
    """The step of SGD / Adam / AdamW while a program is captured."""
    if closure is not None:
        src = user_src(2)
        raise CaptureError("optimizer", "optimizer.step(closure) is not supported",
                           src and src["file"], src and src["line"])
    _COUNTS[self] = _COUNTS.get(self, 0) + 1
    if _COUNTS[self] > 1 and not _stateless(self):
        src = user_src(2)
        raise CaptureError("optimizer-state", f"{type(self).__name__}.step() called twice "
                           "in one training step: only the first step from zero state is "
                           "captured", src and src["file"], src and src["line"])
    update = STEPS[_base_of(self)]
    with torch.no_grad():
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                index = _Marks.index.get(id(p)) if _Marks.index is not None else None
                if index is not None:
                    g = ops().mark_step_grad(g, index)
                p.copy_(update(group, p, g))


@contextlib.contextmanager
def whole_steps():
    """SGD, Adam and AdamW (and subclasses that keep their step) step as one op per
    parameter while the block runs."""
    _COUNTS.clear()
    saved = {cls: cls.__dict__["step"] for cls in STEPS}
    for cls in STEPS:
        cls.step = _whole_step
    try:
        yield
    finally:
        for cls, original in saved.items():
            cls.step = original


@contextlib.contextmanager
def marking(params):
    """Gradient marks for whole steps of these (model) parameters."""
    _Marks.index = {id(p): i for i, p in enumerate(params)}
    try:
        yield
    finally:
        _Marks.index = None


def capture_whole(opt):
    """Kept for callers that hold one optimizer: whole capture is by class (whole_steps)."""
    return opt
