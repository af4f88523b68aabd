import torch.nn.functional as F

from base import (BATCH_LAYOUT, MESH, batch, build_logical, build_rank, finalize_grads,  # noqa: F401
                  optimizer)


def loss(model, b):
    ids = (b["x"] > 0).long()
    return F.mse_loss(model(b["x"]) * F.one_hot(ids).sum(-1), b["y"])
