import torch

from base import (BATCH_LAYOUT, MESH, Net, batch, build_logical, loss,  # noqa: F401
                  optimizer)


def build_rank(ctx):
    return torch.nn.parallel.DistributedDataParallel(Net(), process_group=ctx.groups["dp"])
