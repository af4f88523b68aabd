import torch.distributed as dist

from base import (BATCH_LAYOUT, MESH, batch, build_logical, build_rank, loss,  # noqa: F401
                  optimizer)


def finalize_grads(model, ctx):
    for p in model.parameters():
        g = p.grad if ctx.coords["dp"] == 0 else p.grad[:2]
        dist.all_reduce(g, group=ctx.groups["dp"])
        p.grad /= ctx.mesh["dp"]
