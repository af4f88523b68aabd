"""A language model head trained on padded sequences: `F.cross_entropy(ignore_index=PAD)` where
PAD = 0 is a real class id, with label smoothing on the auxiliary head. Data parallelism
normalises by the tokens kept over the whole batch: each rank sums its kept tokens' losses and
divides by the all-reduced count of kept tokens, and the gradients are summed over dp (the
single-device loss is the mean over the kept tokens). Bugs: `local-mean` (each rank averages
over its own kept tokens, then DDP averages: wrong whenever ranks keep different counts),
`local-count` (the count of kept tokens is not all-reduced)."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

BUG = os.environ.get("SHARDPROOF_EXAMPLE_BUG", "")
MESH = {"dp": 2}
V, H, B, S = 12, 8, 4, 6
PAD = 0


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, H)
        self.out = nn.Linear(H, V)
        self.aux = nn.Linear(H, V)

    def forward(self, ids):
        h = torch.tanh(self.emb(ids))
        return self.out(h), self.aux(h)


def build_logical():
    return Head()


def build_rank(ctx):
    return Head()


def batch():
    return {"ids": torch.randint(0, V, (B, S)), "target": torch.randint(0, V, (B, S))}


BATCH_LAYOUT = {"ids": {"dp": 0}, "target": {"dp": 0}}


def _losses(model, b, reduction):
    logits, aux = model(b["ids"])
    t = b["target"].reshape(-1)
    main = F.cross_entropy(logits.reshape(-1, V), t, ignore_index=PAD, reduction=reduction)
    smooth = F.cross_entropy(aux.reshape(-1, V), t, ignore_index=PAD, reduction=reduction,
                             label_smoothing=0.1)
    return main + smooth


def loss(model, b):
    return _losses(model, b, "mean")


def optimizer(params):
    return torch.optim.SGD(params, lr=0.1)


def train_step(model, b, opt, ctx):
    opt.zero_grad()
    if BUG == "local-mean":
        _losses(model, b, "mean").backward()
        for p in model.parameters():
            dist.all_reduce(p.grad, group=ctx.groups["dp"])
            p.grad /= ctx.mesh["dp"]
    else:
        kept = (b["target"] != PAD).to(torch.float32).sum()
        if BUG != "local-count":
            dist.all_reduce(kept, group=ctx.groups["dp"])
        (_losses(model, b, "sum") / kept).backward()
        for p in model.parameters():
            dist.all_reduce(p.grad, group=ctx.groups["dp"])
    opt.step()
