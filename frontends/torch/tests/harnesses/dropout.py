import torch.nn.functional as F

from base import (BATCH_LAYOUT, MESH, batch, build_logical, build_rank, finalize_grads,  # noqa: F401
                  optimizer)


def loss(model, b):
    h = F.dropout(model(b["x"]), p=0.1, training=True)
    return F.mse_loss(h, b["y"])
