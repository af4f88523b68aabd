"""Process groups kept in module globals, Megatron's parallel_state: initialize_model_parallel
runs once per process and refuses a second call, so each program must be captured from fresh
module state, as its rank's own process would run it (docs/torch-harness.md).
Bug: `dp-groups-contiguous` builds the data-parallel groups from neighbouring ranks (the
tensor-parallel ranks), so the DDP all-reduce sums over the wrong ranks."""
import torch
import torch.distributed as dist
import torch.nn.functional as F

import parallel_state as ps
from model import MLP

MESH = {"dp": 2, "tp": 2}
H, FF = 8, 16


def build_logical():
    ps.initialize_model_parallel(1)  # the one-rank world: every group is this rank
    return MLP(H, FF, parallel=False)


def build_rank(ctx):
    ps.initialize_model_parallel(ctx.mesh["tp"])
    return MLP(H, FF, parallel=True)


def batch():
    return {"x": torch.randn(4, H), "y": torch.randn(4, H)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.SGD(params, lr=0.1)


def finalize_grads(model, ctx):
    g = ps.get_data_parallel_group()
    n = dist.get_world_size(group=g)
    for p in model.parameters():
        dist.all_reduce(p.grad, group=g)
        p.grad /= n
