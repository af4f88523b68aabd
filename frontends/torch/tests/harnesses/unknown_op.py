import torch
import torch.nn.functional as F

from base import (BATCH_LAYOUT, MESH, batch, build_logical, build_rank, finalize_grads,  # noqa: F401
                  optimizer)


def loss(model, b):
    h = torch.cumprod(model(b["x"]), dim=0)
    return F.mse_loss(h, b["y"])
