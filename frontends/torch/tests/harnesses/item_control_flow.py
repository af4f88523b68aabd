import torch.nn.functional as F

from base import (BATCH_LAYOUT, MESH, batch, build_logical, build_rank, finalize_grads,  # noqa: F401
                  optimizer)


def loss(model, b):
    out = F.mse_loss(model(b["x"]), b["y"])
    if out.item() > 1.0:
        out = out * 0.5
    return out
