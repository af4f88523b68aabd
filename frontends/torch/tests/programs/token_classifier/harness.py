"""A token classifier as users write one: class weights of the positions kept as a module-level
tensor (made at import, outside capture's fake tensors), `F.cross_entropy` on `[batch, classes,
seq]` logits (nll_loss2d), a smooth-L1 and a Huber auxiliary loss, and data parallelism written
as per-parameter gradient hooks that all-reduce asynchronously during backward and are waited
for in finalize_grads. Bugs: `no-average` (the hook sums), `hook-skips-bias` (biases get no
hook: each rank steps with its own bias gradient)."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

BUG = os.environ.get("SHARDPROOF_EXAMPLE_BUG", "")
MESH = {"dp": 2}
V, H, C, S = 20, 8, 5, 6
POSITION_WEIGHT = torch.linspace(0.5, 1.5, S)  # module-level: a real tensor in a fake capture


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, H)
        self.mix = nn.Linear(H, H)
        self.cls = nn.Linear(H, C)
        self.reg = nn.Linear(H, 1)

    def forward(self, ids):
        h = torch.tanh(self.mix(self.emb(ids))) * POSITION_WEIGHT[None, :, None]
        return self.cls(h).transpose(1, 2), self.reg(h).squeeze(-1)   # [B, C, S], [B, S]


_pending = []


def build_logical():
    return Tagger()


def build_rank(ctx):
    m = Tagger()
    group, n = ctx.groups["dp"], ctx.mesh["dp"]

    def hook(grad):
        grad = grad.clone() if BUG == "no-average" else grad / n
        _pending.append(dist.all_reduce(grad, group=group, async_op=True))
        return grad

    for name, p in m.named_parameters():
        if BUG == "hook-skips-bias" and name.endswith("bias"):
            continue
        p.register_hook(hook)
    return m


def batch():
    return {"ids": torch.randint(0, V, (4, S)), "tags": torch.randint(0, C, (4, S)),
            "score": torch.randn(4, S)}


BATCH_LAYOUT = {"ids": {"dp": 0}, "tags": {"dp": 0}, "score": {"dp": 0}}


def loss(model, b):
    logits, score = model(b["ids"])
    return F.cross_entropy(logits, b["tags"]) + 0.5 * F.smooth_l1_loss(score, b["score"]) + \
        0.25 * F.huber_loss(score, b["score"], delta=0.5)


def optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3)


def finalize_grads(model, ctx):
    for work in _pending:
        work.wait()
    _pending.clear()
