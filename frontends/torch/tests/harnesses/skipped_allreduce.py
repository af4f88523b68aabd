import torch.distributed as dist

from base import (BATCH_LAYOUT, MESH, batch, build_logical, build_rank, loss,  # noqa: F401
                  optimizer)


def finalize_grads(model, ctx):
    for i, p in enumerate(model.parameters()):
        if ctx.coords["dp"] == 1 and i == 1:
            continue  # rank 1 forgets the bias all-reduce its peer makes
        dist.all_reduce(p.grad, group=ctx.groups["dp"])
        p.grad /= ctx.mesh["dp"]
