"""Megatron-style global process groups: created once per process by
initialize_model_parallel (which refuses a second call), read through getters."""
import os

import torch.distributed as dist

BUG = os.environ.get("SHARDPROOF_EXAMPLE_BUG", "")

_TP_GROUP = None
_DP_GROUP = None


def initialize_model_parallel(tp_size):
    global _TP_GROUP, _DP_GROUP
    assert _TP_GROUP is None, "model parallel group is already initialized"
    world = dist.get_world_size()
    rank = dist.get_rank()
    dp_size = world // tp_size
    # Megatron's order: every data-parallel group first, then every tensor-parallel group;
    # every rank creates every group and keeps its own.
    for i in range(tp_size):
        if BUG == "dp-groups-contiguous":   # ranks of a dp group taken as neighbours
            ranks = list(range(i * dp_size, (i + 1) * dp_size))
        else:
            ranks = list(range(i, world, tp_size))
        g = dist.new_group(ranks)
        if rank in ranks:
            _DP_GROUP = g
    for i in range(dp_size):
        ranks = list(range(i * tp_size, (i + 1) * tp_size))
        g = dist.new_group(ranks)
        if rank in ranks:
            _TP_GROUP = g


def get_tensor_model_parallel_group():
    assert _TP_GROUP is not None, "not initialized"
    return _TP_GROUP


def get_data_parallel_group():
    assert _DP_GROUP is not None, "not initialized"
    return _DP_GROUP


def get_tensor_model_parallel_world_size():
    return dist.get_world_size(group=get_tensor_model_parallel_group())
