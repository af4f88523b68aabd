"""Torch functions whose kernels read tensor values to decide a shape (`one_hot` checks its
ids, `repeat_interleave` builds an index from its counts), replaced during capture by the
same computation in value-independent ops, where their arguments make that possible."""
import contextlib

import torch
import torch.nn.functional as F

from ..errors import CaptureError
from .source import user_src


def _one_hot(original):
    def one_hot(t, num_classes=-1):
        if num_classes is None or num_classes < 0:
            src = user_src(2)
            raise CaptureError("data-dependent", "F.one_hot without num_classes reads the ids' "
                               "maximum; pass num_classes", src and src["file"],
                               src and src["line"])
        classes = torch.arange(num_classes, device=t.device)
        return (t.unsqueeze(-1) == classes).to(torch.int64)
    return one_hot


def _repeat_interleave(original):
    def repeat_interleave(x, repeats=None, dim=None, *, output_size=None):
        if isinstance(x, torch.Tensor) and isinstance(repeats, int):
            if dim is None:
                x, dim = x.reshape(-1), 0
            dim %= x.dim()
            shape = list(x.shape)
            tiled = x.unsqueeze(dim + 1).expand(*shape[:dim + 1], repeats, *shape[dim + 1:])
            shape[dim] *= repeats
            return tiled.reshape(shape)
        return original(x, repeats, dim, output_size=output_size) if repeats is not None \
            else original(x, output_size=output_size)
    return repeat_interleave


def _cross_entropy(original):
    def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                      reduce=None, reduction="mean", label_smoothing=0.0):
        """Label smoothing without class weights: (1 - e) nll + e/C * the reduced
        -sum(log p) over classes (torch's kernel masks ignored targets with a value-
        dependent selection; targets are class indices, so only an ignore_index inside
        0..C-1 can occur, and then a mask does the selection)."""
        if not label_smoothing or weight is not None or size_average is not None or \
                reduce is not None or target.is_floating_point():
            return original(input, target, weight, size_average, ignore_index, reduce,
                            reduction, label_smoothing)
        class_dim = 1 if input.dim() > 1 else 0
        logp = F.log_softmax(input, class_dim)
        nll = F.nll_loss(logp, target, ignore_index=ignore_index, reduction=reduction)
        smooth = -logp.sum(class_dim)
        n = input.shape[class_dim]
        if 0 <= ignore_index < n:
            # An ignore_index that names a class (a pad id): torch zeroes the ignored
            # targets' smoothing term and the mean divides by the targets kept.
            keep = (target != ignore_index).to(smooth.dtype)
            smooth = smooth * keep
            if reduction == "mean":
                smooth = smooth.sum() / keep.sum()
            elif reduction == "sum":
                smooth = smooth.sum()
        elif reduction == "mean":
            smooth = smooth.mean()
        elif reduction == "sum":
            smooth = smooth.sum()
        return (1 - label_smoothing) * nll + (label_smoothing / n) * smooth
    return cross_entropy


@contextlib.contextmanager
def installed():
    patches = [(F, "one_hot", _one_hot), (F, "cross_entropy", _cross_entropy),
               (torch, "repeat_interleave", _repeat_interleave),
               (torch.Tensor, "repeat_interleave", _repeat_interleave)]
    saved = []
    for owner, name, make in patches:
        original = getattr(owner, name)
        saved.append((owner, name, original))
        setattr(owner, name, make(original))
    try:
        yield
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)
