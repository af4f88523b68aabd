import torch.distributed as dist

from base import (BATCH_LAYOUT, MESH, batch, build_logical, build_rank, loss,  # noqa: F401
                  optimizer)


def finalize_grads(model, ctx):
    # ctx is read-only: an edit would change what every later read of it sees
    ctx.coords["dp"] = 0
    for p in model.parameters():
        dist.all_reduce(p.grad, group=ctx.groups["dp"])
