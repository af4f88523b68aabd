from base import (BATCH_LAYOUT, MESH, batch, build_logical, build_rank, loss,  # noqa: F401
                  optimizer)
import builtins
import torch.distributed as dist


def finalize_grads(model, ctx):
    # a group kept where a fresh import does not reset it: the next program gets a stale one
    g = getattr(builtins, "_shardproof_test_stale_group", None)
    if g is None:
        g = builtins._shardproof_test_stale_group = ctx.groups["dp"]
    if ctx.rank >= 0:  # every rank its own program
        for p in model.parameters():
            dist.all_reduce(p.grad, group=g)
