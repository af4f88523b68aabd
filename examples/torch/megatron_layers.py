"""A small Megatron-style tensor-parallel toolkit, written as a user would: autograd
Functions with collectives inside, Column/RowParallelLinear, a vocab-parallel embedding and
cross entropy. With group=None every layer is its plain single-device counterpart, so the
logical and the rank models share parameter names.

SHARDPROOF_EXAMPLE_BUG selects a classic bug (see README.md)."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def bug(name):
    return os.environ.get("SHARDPROOF_EXAMPLE_BUG", "") == name


class CopyToRegion(torch.autograd.Function):
    """Identity forward; all-reduce of the input gradient backward (f in Megatron)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        if not bug("no-backward-allreduce"):
            grad = grad.clone()
            dist.all_reduce(grad, group=ctx.group)
        return grad, None


class ReduceFromRegion(torch.autograd.Function):
    """All-reduce forward; identity backward (g in Megatron)."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class ColumnParallelLinear(nn.Module):
    """y = x W^T + b with W split by rows (output features) over the group."""

    def __init__(self, d_in, d_out, group=None):
        super().__init__()
        self.group = group
        n = dist.get_world_size(group) if group is not None else 1
        self.weight = nn.Parameter(torch.empty(d_out // n, d_in))
        self.bias = nn.Parameter(torch.empty(d_out // n))
        for p in (self.weight, self.bias):
            p.tensor_model_parallel, p.partition_dim, p.partition_stride = True, 0, 1

    def forward(self, x):
        if self.group is not None:
            x = CopyToRegion.apply(x, self.group)
        return F.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """y = sum over ranks of x_r W_r^T, + b once: W split by columns (input features)."""

    def __init__(self, d_in, d_out, group=None):
        super().__init__()
        self.group = group
        n = dist.get_world_size(group) if group is not None else 1
        self.weight = nn.Parameter(torch.empty(d_out, d_in // n))
        self.bias = nn.Parameter(torch.empty(d_out))
        self.weight.tensor_model_parallel, self.weight.partition_dim = True, 1

    def forward(self, x):
        if self.group is None:
            return F.linear(x, self.weight, self.bias)
        if bug("bias-before-allreduce"):
            return ReduceFromRegion.apply(F.linear(x, self.weight, self.bias), self.group)
        return ReduceFromRegion.apply(F.linear(x, self.weight), self.group) + self.bias


def ddp_finalize(model, group, size):
    """Data-parallel gradient all-reduce and averaging."""
    for p in model.parameters():
        if p.grad is None:
            continue
        dist.all_reduce(p.grad, group=group)
        if not bug("no-ddp-average"):
            p.grad /= size


# ---- sequence parallelism: activations outside the tensor-parallel regions are split
# along the sequence (dim 0 of [seq, batch, hidden]) over the tp group.

def _gather_seq(x, group):
    n = dist.get_world_size(group)
    out = x.new_empty((x.shape[0] * n,) + tuple(x.shape[1:]))
    dist.all_gather_into_tensor(out, x.contiguous(), group=group)
    return out


def _reduce_scatter_seq(x, group):
    n = dist.get_world_size(group)
    out = x.new_empty((x.shape[0] // n,) + tuple(x.shape[1:]))
    dist.reduce_scatter_tensor(out, x.contiguous(), group=group)
    return out


class GatherFromSequenceParallel(torch.autograd.Function):
    """All-gather along the sequence forward; reduce-scatter backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _gather_seq(x, group)

    @staticmethod
    def backward(ctx, grad):
        if bug("no-backward-allreduce"):  # keeps only this rank's rows, unsummed
            n = dist.get_world_size(ctx.group)
            r = dist.get_rank(ctx.group)
            rows = grad.shape[0] // n
            return grad[r * rows:(r + 1) * rows].clone(), None
        return _reduce_scatter_seq(grad, ctx.group), None


class ReduceScatterToSequenceParallel(torch.autograd.Function):
    """Reduce-scatter along the sequence forward; all-gather backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _reduce_scatter_seq(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _gather_seq(grad, ctx.group), None


class SPColumnParallelLinear(ColumnParallelLinear):
    """Column-parallel linear whose input is sequence-parallel: gathered first.
    `stride` > 1 interleaves blocks (a fused QKV: [q; k; v], each split over tp)."""

    def __init__(self, d_in, d_out, group=None, stride=1):
        super().__init__(d_in, d_out, group)
        for p in (self.weight, self.bias):
            p.partition_stride = stride

    def forward(self, x):
        if self.group is not None:
            x = GatherFromSequenceParallel.apply(x, self.group)
        return F.linear(x, self.weight, self.bias)


class SPRowParallelLinear(RowParallelLinear):
    """Row-parallel linear whose output is reduce-scattered to sequence-parallel."""

    def forward(self, x):
        if self.group is None:
            return F.linear(x, self.weight, self.bias)
        if bug("bias-before-allreduce"):
            return ReduceScatterToSequenceParallel.apply(F.linear(x, self.weight, self.bias),
                                                         self.group)
        return ReduceScatterToSequenceParallel.apply(F.linear(x, self.weight), self.group) + \
            self.bias


class VocabParallelEmbedding(nn.Module):
    """Embedding with the vocabulary split over tp: ids outside this rank's range look up
    row 0 and are zeroed; the partial embeddings are summed (reduce-scattered to sequence
    parallel)."""

    def __init__(self, vocab, hidden, group=None, sequence_parallel=True):
        super().__init__()
        self.group = group
        self.sequence_parallel = sequence_parallel
        n = dist.get_world_size(group) if group is not None else 1
        self.per_rank = vocab // n
        self.weight = nn.Parameter(torch.empty(self.per_rank, hidden))
        self.weight.tensor_model_parallel, self.weight.partition_dim = True, 0

    def forward(self, ids):  # ids [seq, batch] -> [seq(/tp), batch, hidden]
        if self.group is None:
            return F.embedding(ids, self.weight)
        start = dist.get_rank(self.group) * self.per_rank
        outside = (ids < start) | (ids >= start + self.per_rank)
        local = ids - start
        local[outside] = 0
        out = F.embedding(local, self.weight)
        out[outside, :] = 0.0
        if not self.sequence_parallel:
            return ReduceFromRegion.apply(out, self.group)
        return ReduceScatterToSequenceParallel.apply(out, self.group)


class VocabParallelCrossEntropy(torch.autograd.Function):
    """Megatron's cross entropy over vocabulary-split logits [tokens, vocab/tp]. With
    group=None it is the single-device computation, written the same way (shardproof
    treats exp and log as arbitrary functions, so both programs must compute softmax by
    the same formula)."""

    @staticmethod
    def forward(ctx, logits, target, group):
        n = dist.get_world_size(group) if group is not None else 1
        per_rank = logits.shape[-1]
        start = dist.get_rank(group) * per_rank if group is not None else 0
        logits_max = logits.amax(dim=-1)
        if group is not None:
            dist.all_reduce(logits_max, op=dist.ReduceOp.MAX, group=group)
        shifted = logits - logits_max.unsqueeze(-1)
        outside = (target < start) | (target >= start + per_rank)
        local = target - start
        local[outside] = 0
        rows = torch.arange(shifted.shape[0])
        predicted = shifted[rows, local]
        predicted[outside] = 0.0
        exp_logits = torch.exp(shifted)
        sum_exp = exp_logits.sum(dim=-1)
        if group is not None:
            dist.all_reduce(predicted, group=group)
            dist.all_reduce(sum_exp, group=group)
        loss = torch.log(sum_exp) - predicted
        softmax = exp_logits / sum_exp.unsqueeze(-1)
        ctx.save_for_backward(softmax, outside, local)
        ctx.n = n
        return loss

    @staticmethod
    def backward(ctx, grad):
        softmax, outside, local = ctx.saved_tensors
        columns = torch.arange(softmax.shape[-1])
        hit = (columns == local.unsqueeze(-1)).to(softmax.dtype)
        hit = hit * (1.0 - outside.to(softmax.dtype)).unsqueeze(-1)
        return (softmax - hit) * grad.unsqueeze(-1), None, None
