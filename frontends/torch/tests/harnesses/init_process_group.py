import torch.distributed as dist

from base import (BATCH_LAYOUT, MESH, batch, build_logical, build_rank, loss,  # noqa: F401
                  optimizer)


def finalize_grads(model, ctx):
    # the contract: the front end initialises torch.distributed, a harness never does
    dist.init_process_group("gloo")
    for p in model.parameters():
        dist.all_reduce(p.grad, group=ctx.groups["dp"])
