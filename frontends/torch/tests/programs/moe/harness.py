"""A toy expert-parallel MoE layer over an `ep` axis with all_to_all_single (equal splits):
expert e lives on rank e; a static router sends block j of every rank's tokens to expert j;
the dispatch and the combine are an autograd.Function whose backward is the reverse
all-to-all (as DeepSpeed's _AllToAll).

Logically, token i goes to expert (i // BLOCK) % EXPERTS, with BLOCK = tokens per rank /
EXPERTS. The loss is a mean over all tokens, so each rank divides its local mean by ep.

Bugs (SHARDPROOF_EXAMPLE_BUG): no-loss-divide (the local mean is not divided by ep),
combine-order (the combine all-to-all's output blocks are used in reverse order),
no-backward-a2a (the backward of the dispatch returns the gradient without the reverse
all-to-all)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tplayers import bug  # noqa: E402

EXPERTS = 2
MESH = {"ep": EXPERTS}
HIDDEN, TOKENS = 4, 8
BLOCK = TOKENS // EXPERTS // EXPERTS


class AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x.contiguous(), group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        if bug("no-backward-a2a"):
            return grad, None
        out = torch.empty_like(grad)
        dist.all_to_all_single(out, grad.contiguous(), group=ctx.group)
        return out, None


class MoE(nn.Module):
    def __init__(self, experts, group=None):
        super().__init__()
        self.group = group
        self.proj = nn.Linear(HIDDEN, HIDDEN)          # replicated, before the experts
        self.experts = nn.ModuleDict({str(e): nn.Linear(HIDDEN, HIDDEN) for e in experts})

    def forward(self, x):
        h = self.proj(x)
        if self.group is None:  # one device: every expert here
            n = h.shape[0]
            blocks = h.view(n // (BLOCK * EXPERTS), EXPERTS, BLOCK, HIDDEN)
            parts = blocks.unbind(1)
            outs = [torch.relu(self.experts[str(e)](parts[e])) for e in range(EXPERTS)]
            return torch.stack(outs, 1).reshape(n, HIDDEN)
        (e,) = [int(k) for k in self.experts]
        routed = AllToAll.apply(h, self.group)           # block j of every rank -> rank j
        y = torch.relu(self.experts[str(e)](routed))
        back = AllToAll.apply(y, self.group)
        if bug("combine-order"):
            back = torch.cat(list(back.chunk(EXPERTS))[::-1])
        return back


def build_logical():
    return MoE(range(EXPERTS))


def build_rank(ctx):
    return MoE([ctx.coords["ep"]], ctx.groups["ep"])


def param_layout(name, param, ctx):
    return None  # experts are held whole by their rank; proj is replicated


def batch():
    return {"x": torch.randn(TOKENS, HIDDEN), "y": torch.randn(TOKENS, HIDDEN)}


BATCH_LAYOUT = {"x": {"ep": 0}, "y": {"ep": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.SGD(params, lr=0.1)


def train_step(model, b, opt, ctx):
    opt.zero_grad()
    n = ctx.mesh["ep"]
    out = loss(model, b)
    if not bug("no-loss-divide"):
        out = out / n
    out.backward()
    # the replicated projection: its gradient summed over the ranks (each saw 1/n of the
    # tokens, with a loss already divided by n)
    dist.all_reduce(model.proj.weight.grad, group=ctx.groups["ep"])
    dist.all_reduce(model.proj.bias.grad, group=ctx.groups["ep"])
    opt.step()
