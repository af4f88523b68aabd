import torch.nn.functional as F

from base import (BATCH_LAYOUT, MESH, batch, build_logical, build_rank, finalize_grads,  # noqa: F401
                  optimizer)


def loss(model, b):
    h = model(b["x"])
    if (h > 0).any():
        h = h * 2
    return F.mse_loss(h, b["y"])
