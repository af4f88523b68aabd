import torch.nn as nn

from base import (BATCH_LAYOUT, MESH, Net, batch, build_logical, finalize_grads,  # noqa: F401
                  loss, optimizer)


class Renamed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x)


def build_rank(ctx):
    return Renamed()
