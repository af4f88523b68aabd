# The program behind wpe-batch1-dp2.json (tests/unread_cut_test.cpp), captured with
# TIED=0 V=4 T=4 H=2 and dp=2: one batch row per rank, so a rank's sum over its batch
# dim has the values of its flattened gradient, and inference claims the flattened twin.
import os
import torch, torch.nn as nn, torch.nn.functional as F, torch.distributed as dist
MESH = {"dp": 2}
V, T, H = int(os.environ.get("V", 32)), int(os.environ.get("T", 8)), int(os.environ.get("H", 16))
TIED = os.environ.get("TIED", "1") == "1"
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, H)
        self.wpe = nn.Embedding(T, H)
        self.head = nn.Linear(H, V, bias=False)
        if TIED:
            self.wte.weight = self.head.weight
    def forward(self, idx, tgt):
        pos = torch.arange(0, idx.shape[1], dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        return F.cross_entropy(self.head(x).view(-1, V), tgt.view(-1))
def build_logical(): return M()
def build_rank(ctx): return M()
def batch(): return {"idx": torch.randint(0, V, (2, T)), "tgt": torch.randint(0, V, (2, T))}
BATCH_LAYOUT = {"idx": {"dp": 0}, "tgt": {"dp": 0}}
def loss(model, b): return model(b["idx"], b["tgt"])
def optimizer(params): return torch.optim.SGD(params, lr=0.1)
def finalize_grads(model, ctx):
    for p in model.parameters():
        dist.all_reduce(p.grad, group=ctx.groups["dp"])
        p.grad /= ctx.mesh["dp"]
