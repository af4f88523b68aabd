from base import BATCH_LAYOUT, MESH, batch, build_logical, build_rank, loss  # noqa: F401
import torch


def optimizer(params):
    return torch.optim.SGD(params, lr=torch.tensor(0.1))
