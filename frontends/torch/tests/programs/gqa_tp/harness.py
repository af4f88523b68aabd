"""Grouped-query attention (Llama-2/Mistral style) with tensor-parallel heads, as a team would
write it: 4 query heads sharing 2 key/value heads, k and v widened with `repeat_interleave`,
query and kv projections column-parallel (each tp rank holds whole kv groups), a row-parallel
output projection; hand-written RMSNorm; a SiLU-gated MLP with separate gate and up
projections; a causal mask from `tril` as `masked_fill(-inf)`; `F.cross_entropy` with
`label_smoothing=0.1`; AdamW with two parameter groups (decay on matrices only); dp x tp.

Bugs (SHARDPROOF_EXAMPLE_BUG):
- kv-repeat-tiled: k and v widened with `.repeat` (tiling: query head i reads kv head
  i % n_kv) where the sharding assumes grouping (query head i reads kv head i // rep);
  on one rank with one local kv head both agree, so only the single-device step changes.
- decay-by-size: the weight-decay group is chosen by parameter size (`numel() >= H * H`,
  meant to pick the matrices); a rank's shards of wq / wo / the MLP are smaller, so the
  ranks skip weight decay on them while the single-device step applies it."""
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MESH = {"dp": 2, "tp": 2}
V, H, N_HEADS, N_KV, FF, S, B = 64, 32, 4, 2, 48, 8, 4
BUG = os.environ.get("SHARDPROOF_EXAMPLE_BUG", "")


class CopyToTP(torch.autograd.Function):
    """Identity forward; the input gradient is summed over the tp ranks."""
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class ReduceFromTP(torch.autograd.Function):
    """Partial sums of a row-parallel layer summed over the tp ranks; identity backward."""
    @staticmethod
    def forward(ctx, x, group):
        x = x.contiguous()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def column_parallel(linear):
    linear.weight.tensor_model_parallel = True
    linear.weight.partition_dim = 0


def row_parallel(linear):
    linear.weight.tensor_model_parallel = True
    linear.weight.partition_dim = 1


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class GQAttention(nn.Module):
    def __init__(self, tp_group=None, tp=1):
        super().__init__()
        self.group = tp_group
        self.head_dim = H // N_HEADS
        self.n_heads = N_HEADS // tp
        self.n_kv = N_KV // tp
        self.n_rep = N_HEADS // N_KV
        self.wq = nn.Linear(H, self.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(H, self.n_kv * self.head_dim, bias=False)
        self.wv = nn.Linear(H, self.n_kv * self.head_dim, bias=False)
        self.wo = nn.Linear(self.n_heads * self.head_dim, H, bias=False)
        if tp_group is not None:
            for lin in (self.wq, self.wk, self.wv):
                column_parallel(lin)
            row_parallel(self.wo)

    def forward(self, x):
        b, s, _ = x.shape
        if self.group is not None:
            x = CopyToTP.apply(x, self.group)
        q = self.wq(x).view(b, s, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, self.n_kv, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, self.n_kv, self.head_dim).transpose(1, 2)
        if BUG == "kv-repeat-tiled":
            k, v = k.repeat(1, self.n_rep, 1, 1), v.repeat(1, self.n_rep, 1, 1)
        else:
            k = k.repeat_interleave(self.n_rep, dim=1)
            v = torch.repeat_interleave(v, self.n_rep, dim=1)
        scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        causal = torch.tril(torch.ones(s, s, dtype=torch.bool))
        scores = scores.masked_fill(~causal, float("-inf"))
        probs = F.softmax(scores.float(), dim=-1).type_as(q)
        out = torch.matmul(probs, v).transpose(1, 2).contiguous().view(b, s, -1)
        out = self.wo(out)
        if self.group is not None:
            out = ReduceFromTP.apply(out, self.group)
        return out


class GatedMLP(nn.Module):
    def __init__(self, tp_group=None, tp=1):
        super().__init__()
        self.group = tp_group
        self.gate_proj = nn.Linear(H, FF // tp, bias=False)
        self.up_proj = nn.Linear(H, FF // tp, bias=False)
        self.down_proj = nn.Linear(FF // tp, H, bias=False)
        if tp_group is not None:
            column_parallel(self.gate_proj)
            column_parallel(self.up_proj)
            row_parallel(self.down_proj)

    def forward(self, x):
        if self.group is not None:
            x = CopyToTP.apply(x, self.group)
        out = self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        if self.group is not None:
            out = ReduceFromTP.apply(out, self.group)
        return out


class DecoderLayer(nn.Module):
    def __init__(self, tp_group=None, tp=1):
        super().__init__()
        self.input_layernorm = RMSNorm(H)
        self.self_attn = GQAttention(tp_group, tp)
        self.post_attention_layernorm = RMSNorm(H)
        self.mlp = GatedMLP(tp_group, tp)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class TinyGQALM(nn.Module):
    def __init__(self, tp_group=None, tp=1):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, H)
        self.layer = DecoderLayer(tp_group, tp)
        self.norm = RMSNorm(H)
        self.lm_head = nn.Linear(H, V, bias=False)

    def forward(self, ids):
        return self.lm_head(self.norm(self.layer(self.embed_tokens(ids))))


def build_logical():
    return TinyGQALM()


def build_rank(ctx):
    return TinyGQALM(ctx.groups["tp"], ctx.mesh["tp"])


def batch():
    return {"ids": torch.randint(0, V, (B, S)), "labels": torch.randint(0, V, (B, S))}


BATCH_LAYOUT = {"ids": {"dp": 0}, "labels": {"dp": 0}}


def loss(model, b):
    logits = model(b["ids"])
    return F.cross_entropy(logits.view(-1, V), b["labels"].view(-1), label_smoothing=0.1)


def optimizer(params):
    params = list(params)
    if BUG == "decay-by-size":
        decay = [p for p in params if p.numel() >= H * H]
    else:
        decay = [p for p in params if p.dim() >= 2 and p.shape[0] != V]  # not the embedding
    ids = {id(p) for p in decay}
    no_decay = [p for p in params if id(p) not in ids]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=3e-4, betas=(0.9, 0.95), eps=1e-8)


def finalize_grads(model, ctx):
    for p in model.parameters():
        dist.all_reduce(p.grad, group=ctx.groups["dp"])
        p.grad.div_(ctx.mesh["dp"])
