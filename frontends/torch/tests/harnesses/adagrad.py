import torch

from base import (BATCH_LAYOUT, MESH, batch, build_logical, build_rank, loss)  # noqa: F401


def optimizer(params):
    # Adagrad makes its state when it is built, before the step is traced
    return torch.optim.Adagrad(params, lr=0.1)
