"""Engine repro (shardproof verify hangs in Z3Algebra::normal_form, outside every budget).

One device, mesh dp=1: the rank program *is* the logical program. A tied embedding/LM head,
one LayerNorm + ReLU MLP residual block, a final LayerNorm, cross entropy; the gradients are
scaled by a global-norm clip coefficient over a list that holds the tied weight twice (so it
is scaled by coef twice). R_ONCE=1 lists every parameter once: verifies in seconds."""
import os
import torch, torch.nn as nn, torch.nn.functional as F

MESH = {"dp": 1}
V, H, FF, S, B = 8, 4, 8, 2, 2
ONCE = os.environ.get("R_ONCE") == "1"


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(H)
        self.fc_in = nn.Linear(H, FF)
        self.fc_out = nn.Linear(FF, H)

    def forward(self, x):
        return x + self.fc_out(F.relu(self.fc_in(self.ln(x))))


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, H)
        self.block = Block()
        self.ln_f = nn.LayerNorm(H)

    def forward(self, ids):
        return F.linear(self.ln_f(self.block(self.emb(ids))), self.emb.weight)


def build_logical():
    return LM()


def build_rank(ctx):
    return LM()


def batch():
    return {"ids": torch.randint(0, V, (B, S)), "t": torch.randint(0, V, (B, S))}


BATCH_LAYOUT = {"ids": {}, "t": {}}


def loss(model, b):
    return F.cross_entropy(model(b["ids"]).reshape(-1, V), b["t"].reshape(-1))


def optimizer(params):
    return torch.optim.SGD(params, lr=0.05)


def finalize_grads(model, ctx):
    params = list(model.parameters())
    if not ONCE:
        params.append(model.emb.weight)  # the tied weight, listed again for the head
    total = torch.zeros(())
    for p in params:
        total = total + p.grad.pow(2).sum()
    coef = torch.clamp(1.0 / (torch.sqrt(total) + 1e-6), max=1.0)
    for p in params:
        p.grad.mul_(coef)
