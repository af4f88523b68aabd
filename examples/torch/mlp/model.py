"""An input projection (replicated), then a two-layer MLP: column-parallel fc1, GELU,
row-parallel fc2. The replicated projection's gradient needs fc1's backward all-reduce."""
import torch.nn as nn
import torch.nn.functional as F

from megatron_layers import ColumnParallelLinear, RowParallelLinear


class MLP(nn.Module):
    def __init__(self, hidden, ffn, tp_group=None):
        super().__init__()
        self.inp = nn.Linear(hidden, hidden)
        self.fc1 = ColumnParallelLinear(hidden, ffn, tp_group)
        self.fc2 = RowParallelLinear(ffn, hidden, tp_group)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(self.inp(x))))
