"""A GPT block in Megatron style: vocab-parallel embedding, one pre-LN transformer layer
(fused QKV column-parallel with stride 3, causal attention, row-parallel projection,
column/row-parallel MLP), sequence parallelism between the tensor-parallel regions, a
vocab-parallel output layer and cross entropy. tp_group=None is the single-device model
with the same parameter names. Activations are [seq, batch, hidden]."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from megatron_layers import (ColumnParallelLinear, CopyToRegion, GatherFromSequenceParallel,
                             RowParallelLinear, SPColumnParallelLinear, SPRowParallelLinear,
                             VocabParallelCrossEntropy, VocabParallelEmbedding)


def column(d_in, d_out, group, sp, stride=1):
    if sp:
        return SPColumnParallelLinear(d_in, d_out, group, stride)
    layer = ColumnParallelLinear(d_in, d_out, group)
    for p in (layer.weight, layer.bias):
        p.partition_stride = stride
    return layer


def row(d_in, d_out, group, sp):
    return (SPRowParallelLinear if sp else RowParallelLinear)(d_in, d_out, group)


class Attention(nn.Module):
    def __init__(self, hidden, heads, group, tp, sp):
        super().__init__()
        self.heads = heads // tp
        self.head_dim = hidden // heads
        self.qkv = column(hidden, 3 * hidden, group, sp, stride=3)
        self.proj = row(hidden, hidden, group, sp)

    def forward(self, x):
        qkv = self.qkv(x)                                  # [s, b, 3 * h_local]
        s, b, _ = qkv.shape
        q, k, v = qkv.split(self.heads * self.head_dim, dim=-1)

        def heads(t):                                      # -> [b, heads, s, d]
            return t.reshape(s, b, self.heads, self.head_dim).permute(1, 2, 0, 3)

        q, k, v = heads(q), heads(k), heads(v)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        causal = torch.tril(torch.ones(s, s, dtype=torch.bool))
        scores = scores.masked_fill(causal.logical_not(), -10000.0)
        out = F.softmax(scores, dim=-1) @ v                # [b, heads, s, d]
        out = out.permute(2, 0, 1, 3).reshape(s, b, self.heads * self.head_dim)
        return self.proj(out)


class MLP(nn.Module):
    def __init__(self, hidden, ffn, group, sp):
        super().__init__()
        self.fc1 = column(hidden, ffn, group, sp)
        self.fc2 = row(ffn, hidden, group, sp)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class GPT(nn.Module):
    def __init__(self, vocab, hidden, heads, ffn, layers=1, tp_group=None, tp=1,
                 sequence_parallel=True):
        super().__init__()
        self.group = tp_group
        self.sp = sequence_parallel
        sp = sequence_parallel
        self.embed = VocabParallelEmbedding(vocab, hidden, tp_group, sp)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            block = nn.Module()
            block.ln1 = nn.LayerNorm(hidden)
            block.attn = Attention(hidden, heads, tp_group, tp, sp)
            block.ln2 = nn.LayerNorm(hidden)
            block.mlp = MLP(hidden, ffn, tp_group, sp)
            self.blocks.append(block)
        self.ln_f = nn.LayerNorm(hidden)
        self.head = nn.Parameter(torch.empty(vocab // tp, hidden))
        self.head.tensor_model_parallel, self.head.partition_dim = True, 0

    def forward(self, ids, target):
        x = self.embed(ids.t())                            # [s(/tp), b, h]
        for blk in self.blocks:
            x = x + blk.attn(blk.ln1(x))
            x = x + blk.mlp(blk.ln2(x))
        x = self.ln_f(x)
        if self.group is not None:
            x = (GatherFromSequenceParallel if self.sp else CopyToRegion).apply(x, self.group)
        logits = x @ self.head.t()                         # [s, b, vocab/tp]
        s, b, v = logits.shape
        per_token = VocabParallelCrossEntropy.apply(logits.reshape(s * b, v),
                                                    target.t().reshape(s * b), self.group)
        return per_token.mean()

    def norm_weights(self):
        """Parameters replicated over tp whose gradients come from this rank's sequence
        chunk only: they need a tp all-reduce under sequence parallelism."""
        if not self.sp:
            return
        for name, p in self.named_parameters():
            if ".ln" in name or name.startswith("ln_f") or name.endswith("proj.bias") or \
                    name.endswith("fc2.bias"):
                yield p
