"""A Llama-style block as a user might write it: hand-written RMSNorm, a fused QKV (partition
stride 3) and a fused SwiGLU gate/up (stride 2), RoPE tables as buffers, a causal mask with
-inf, an embedding and a cross entropy; Adam; dp x tp. SHARDPROOF_EXAMPLE_BUG selects a bug."""
import math, os
import torch, torch.nn as nn, torch.nn.functional as F, torch.distributed as dist

MESH = {"dp": 2, "tp": 2}
V, H, NH, FF, S, B = 32, 16, 4, 32, 4, 2
BUG = os.environ.get("SHARDPROOF_EXAMPLE_BUG", "")

class Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, g):
        ctx.g = g
        return x
    @staticmethod
    def backward(ctx, gr):
        gr = gr.clone()
        if BUG != "no-backward-allreduce":
            dist.all_reduce(gr, group=ctx.g)
        return gr, None

class Reduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, g):
        x = x.clone()
        dist.all_reduce(x, op=dist.ReduceOp.MAX if BUG == "allreduce-max" else dist.ReduceOp.SUM, group=g)
        return x
    @staticmethod
    def backward(ctx, gr):
        return gr, None

class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

def rope(x, cos, sin):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin

class Block(nn.Module):
    def __init__(self, tp_group=None, tp=1):
        super().__init__()
        self.g = tp_group
        self.nh = NH // tp
        self.hd = H // NH
        self.attn_norm = RMSNorm(H)
        self.wqkv = nn.Linear(H, 3 * H // tp, bias=False)
        self.wo = nn.Linear(H // tp, H, bias=False)
        self.mlp_norm = RMSNorm(H)
        self.w13 = nn.Linear(H, 2 * FF // tp, bias=False)
        self.w2 = nn.Linear(FF // tp, H, bias=False)
        if tp_group is not None:
            for p, d, s in ((self.wqkv.weight, 0, 3), (self.wo.weight, 1, 1),
                            (self.w13.weight, 0, 2), (self.w2.weight, 1, 1)):
                p.tensor_model_parallel, p.partition_dim, p.partition_stride = True, d, s
        t = torch.arange(S, dtype=torch.float32)
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd))
        f = torch.outer(t, inv)
        emb = torch.cat([f, f], -1)
        self.register_buffer("cos", emb.cos())
        self.register_buffer("sin", emb.sin())

    def _in(self, x):
        return Copy.apply(x, self.g) if self.g is not None else x
    def _out(self, x):
        return Reduce.apply(x, self.g) if self.g is not None else x

    def forward(self, x):
        b, s, _ = x.shape
        h = self._in(self.attn_norm(x))
        qkv = self.wqkv(h)
        q, k, v = qkv.chunk(3, dim=-1)
        q = q.view(b, s, self.nh, self.hd).transpose(1, 2)
        k = k.view(b, s, self.nh, self.hd).transpose(1, 2)
        v = v.view(b, s, self.nh, self.hd).transpose(1, 2)
        q, k = rope(q, self.cos, self.sin), rope(k, self.cos, self.sin)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        o = (att @ v).transpose(1, 2).reshape(b, s, self.nh * self.hd)
        x = x + self._out(self.wo(o))
        h = self._in(self.mlp_norm(x))
        g, u = self.w13(h).chunk(2, dim=-1)
        x = x + self._out(self.w2(F.silu(g) * u))
        return x

class Model(nn.Module):
    def __init__(self, tp_group=None, tp=1):
        super().__init__()
        self.emb = nn.Embedding(V, H)
        self.block = Block(tp_group, tp)
        self.norm = RMSNorm(H)
        self.head = nn.Linear(H, V, bias=False)
    def forward(self, ids, tgt):
        x = self.block(self.emb(ids))
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, V), tgt.view(-1))

def build_logical():
    return Model()

def build_rank(ctx):
    return Model(ctx.groups["tp"], ctx.mesh["tp"])

def batch():
    return {"ids": torch.randint(0, V, (B, S)), "tgt": torch.randint(0, V, (B, S))}

BATCH_LAYOUT = {"ids": {"dp": 0}, "tgt": {"dp": 0}}

def loss(model, b):
    return model(b["ids"], b["tgt"])

def optimizer(params):
    return torch.optim.Adam(params, lr=1e-3)

def finalize_grads(model, ctx):
    for p in model.parameters():
        dist.all_reduce(p.grad, group=ctx.groups["dp"])
        if BUG != "no-ddp-average":
            p.grad.div_(ctx.mesh["dp"])
