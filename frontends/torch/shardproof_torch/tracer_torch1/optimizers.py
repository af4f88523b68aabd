"""torch.optim.SGD / Adam / AdamW as single graph nodes: their first step from zero state
is exactly the plan's `sgd` / `adam` (the lowering says how), and capturing them whole
avoids Adam's `step.item()`, which no fake tensor can answer. Other optimizers are traced
through like user code."""
import types

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


def _sgd_step(opt, group, p):
    return ops().sgd_step(p, p.grad, _scalar(group, "lr", "SGD"),
                          _scalar(group, "momentum", "SGD"),
                          _scalar(group, "weight_decay", "SGD"),
                          bool(group.get("nesterov", False)), bool(group.get("maximize", False)))


def _adam_step(decoupled):
    def step(opt, group, p):
        beta1, beta2 = group["betas"]
        return ops().adam_step(p, p.grad, _scalar(group, "lr", "Adam"), float(beta1),
                               float(beta2), _scalar(group, "eps", "Adam"),
                               _scalar(group, "weight_decay", "Adam"), decoupled,
                               bool(group.get("maximize", False)))
    return step


STEPS = {torch.optim.SGD: _sgd_step, torch.optim.Adam: _adam_step(False),
         torch.optim.AdamW: _adam_step(True)}


def capture_whole(opt):
    """Replaces opt.step by one shardproof op per parameter (first step only)."""
    update = STEPS.get(type(opt))
    if update is None:
        return opt
    state = {"steps": 0}

    def step(self, closure=None):
        if closure is not None:
            raise CaptureError("optimizer", "optimizer.step(closure) is not supported")
        state["steps"] += 1
        stateless = type(opt) is torch.optim.SGD and all(
            g["momentum"] == 0 for g in self.param_groups)
        if state["steps"] > 1 and not stateless:
            src = user_src(2)
            raise CaptureError("optimizer-state", f"{type(opt).__name__}.step() called twice in "
                               "one training step: only the first step from zero state is "
                               "captured", src and src["file"], src and src["line"])
        with torch.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.copy_(update(self, group, p))

    opt.step = types.MethodType(step, opt)
    return opt
