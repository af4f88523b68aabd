"""A small language model with its input embedding and LM head tied (one Parameter used twice),
under tensor parallelism: the embedding is vocab-parallel (ids outside the rank's vocabulary
range masked to row 0, their rows zeroed, the partial embeddings all-reduced over tp), the
head multiplies by the same vocabulary shard and all-gathers the logits along the vocabulary
(backward: each rank keeps its own columns); `nn.LayerNorm` and a tensor-parallel ReLU MLP
between; gradients clipped by hand by a global 2-norm (squares of sharded gradients
all-reduced over tp, replicated ones counted once), SGD with momentum and Nesterov, weight
decay; dp x tp.

Bugs (SHARDPROOF_EXAMPLE_BUG):
- norm-over-dp: the sharded squares are all-reduced over the dp group instead of tp.
- global-rank-offset: the embedding's vocabulary offset is taken from the global rank
  (`dist.get_rank()`) instead of the rank within the tp group: right on the first dp
  replica, out of range (every id masked) on the others.

Not a bug: listing the clipped gradients module by module (the tied weight in `emb` and in
`lm_head`, so counted and scaled twice) does the same on one device, so the ranks agree.
SHARDPROOF_EXAMPLE_BUG=tied-counted-twice selects it; it is equivalent and must be."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MESH = {"dp": 2, "tp": 2}
V, H, FF, S, B = 64, 16, 32, 8, 4
MAX_NORM = 1.0
BUG = os.environ.get("SHARDPROOF_EXAMPLE_BUG", "")


class CopyToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class ReduceFromTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class GatherLastDim(torch.autograd.Function):
    """All-gather along the last dim (logits over the vocabulary); backward keeps this rank's
    columns."""
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        n = dist.get_world_size(group)
        parts = [torch.empty_like(x) for _ in range(n)]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx, grad):
        n = dist.get_world_size(ctx.group)
        r = dist.get_rank(ctx.group)
        return grad.chunk(n, dim=-1)[r].contiguous(), None


class VocabParallelEmbedding(nn.Module):
    def __init__(self, group=None, tp=1):
        super().__init__()
        self.group = group
        self.per_rank = V // tp
        rank = 0
        if group is not None:
            rank = dist.get_rank() if BUG == "global-rank-offset" else dist.get_rank(group)
        self.start = rank * self.per_rank
        self.weight = nn.Parameter(torch.randn(self.per_rank, H) * 0.02)
        if group is not None:
            self.weight.tensor_model_parallel = True
            self.weight.partition_dim = 0

    def forward(self, ids):
        if self.group is None:
            return F.embedding(ids, self.weight)
        outside = (ids < self.start) | (ids >= self.start + self.per_rank)
        local = ids - self.start
        local[outside] = 0
        out = F.embedding(local, self.weight)
        out[outside, :] = 0.0
        return ReduceFromTP.apply(out, self.group)


class TiedHead(nn.Module):
    """Logits by the embedding's own weight (assigned after construction: tied)."""
    def __init__(self, group=None):
        super().__init__()
        self.group = group
        self.weight = None

    def forward(self, h):
        if self.group is not None:
            h = CopyToTP.apply(h, self.group)
        logits = F.linear(h, self.weight)
        if self.group is not None:
            logits = GatherLastDim.apply(logits, self.group)
        return logits


class Block(nn.Module):
    def __init__(self, group=None, tp=1):
        super().__init__()
        self.group = group
        self.ln = nn.LayerNorm(H)
        self.fc_in = nn.Linear(H, FF // tp)
        self.fc_out = nn.Linear(FF // tp, H)
        if group is not None:
            for p, d in ((self.fc_in.weight, 0), (self.fc_in.bias, 0), (self.fc_out.weight, 1)):
                p.tensor_model_parallel, p.partition_dim = True, d

    def forward(self, x):
        h = self.ln(x)
        if self.group is not None:
            h = CopyToTP.apply(h, self.group)
        h = F.linear(F.relu(self.fc_in(h)), self.fc_out.weight)
        if self.group is not None:
            h = ReduceFromTP.apply(h, self.group)
        return x + h + self.fc_out.bias


class TiedLM(nn.Module):
    def __init__(self, group=None, tp=1):
        super().__init__()
        self.emb = VocabParallelEmbedding(group, tp)
        self.block = Block(group, tp)
        self.ln_f = nn.LayerNorm(H)
        self.lm_head = TiedHead(group)
        self.lm_head.weight = self.emb.weight

    def forward(self, ids):
        return self.lm_head(self.ln_f(self.block(self.emb(ids))))


def build_logical():
    return TiedLM()


def build_rank(ctx):
    return TiedLM(ctx.groups["tp"], ctx.mesh["tp"])


def batch():
    return {"ids": torch.randint(0, V, (B, S)), "targets": torch.randint(0, V, (B, S))}


BATCH_LAYOUT = {"ids": {"dp": 0}, "targets": {"dp": 0}}


def loss(model, b):
    logits = model(b["ids"])
    return F.cross_entropy(logits.reshape(-1, V), b["targets"].reshape(-1))


def optimizer(params):
    return torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)


def clip_by_global_norm(model, ctx):
    if BUG == "tied-counted-twice":
        params = [p for m in (model.emb, model.block, model.ln_f, model.lm_head)
                  for p in m.parameters()]
    else:
        params = list(model.parameters())
    sharded = torch.zeros(())
    replicated = torch.zeros(())
    for p in params:
        sq = p.grad.pow(2).sum()
        if getattr(p, "tensor_model_parallel", False):
            sharded = sharded + sq
        else:
            replicated = replicated + sq
    norm_group = ctx.groups["dp"] if BUG == "norm-over-dp" else ctx.groups["tp"]
    dist.all_reduce(sharded, group=norm_group)
    total = torch.sqrt(sharded + replicated)
    coef = torch.clamp(MAX_NORM / (total + 1e-6), max=1.0)
    for p in params:
        p.grad.mul_(coef)


def finalize_grads(model, ctx):
    for p in model.parameters():
        dist.all_reduce(p.grad, group=ctx.groups["dp"])
        p.grad /= ctx.mesh["dp"]
    clip_by_global_norm(model, ctx)
