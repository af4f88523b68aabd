import torch
import torch.nn as nn

from base import (BATCH_LAYOUT, MESH, batch, loss, optimizer)  # noqa: F401


class Scaled(nn.Linear):
    def __init__(self):
        super().__init__(4, 4)
        self.gain = torch.full((4,), 0.5)  # a plain attribute, not a registered buffer

    def forward(self, x):
        return super().forward(x) * self.gain


def build_logical():
    return Scaled()


def build_rank(ctx):
    return Scaled()
