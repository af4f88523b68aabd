"""The front end's own ATen ops (torch.library, namespace `shardproof`): collectives that
carry their group, gradient marks and optimizer steps. They show up in the trace as graph
nodes like any ATen op, and functionalization treats them as the pure functions they are."""
import torch

_LIB = None

SCHEMAS = {
    "all_reduce": "all_reduce(Tensor x, str reduce, int gid) -> Tensor",
    "all_gather": "all_gather(Tensor x, int n, int gid) -> Tensor",
    "reduce_scatter": "reduce_scatter(Tensor x, str reduce, int n, int gid) -> Tensor",
    "all_to_all": "all_to_all(Tensor x, int n, int gid) -> Tensor",
    "broadcast": "broadcast(Tensor x, int root, int gid) -> Tensor",
    "send": "send(Tensor x, int peer, int gid) -> Tensor",
    "recv": "recv(Tensor x, int peer, int gid) -> Tensor",
    "mark_grad": "mark_grad(Tensor x, int index) -> Tensor",
    "mark_step_grad": "mark_step_grad(Tensor x, int index) -> Tensor",
    "sgd_step": "sgd_step(Tensor p, Tensor g, float lr, float momentum, float weight_decay, "
                "bool nesterov, bool maximize) -> Tensor",
    "adam_step": "adam_step(Tensor p, Tensor g, float lr, float beta1, float beta2, float eps, "
                 "float weight_decay, bool decoupled, bool maximize) -> Tensor",
}


def _shape_impl(name):
    """Kernels that only get shapes right: capture runs on fake tensors, and the values
    of a real-mode run are never used."""
    def same(x, *args):
        return torch.empty_like(x)

    def gather(x, n, gid):
        return x.new_empty((n,) + tuple(x.shape))

    def scatter(x, reduce, n, gid):
        return x.new_empty((x.shape[0] // n,) + tuple(x.shape[1:]))

    def identity(x, index):  # gradient marks are the identity, also on real tensors
        return x.clone()

    return {"all_gather": gather, "reduce_scatter": scatter, "mark_grad": identity,
            "mark_step_grad": identity}.get(name, same)


def ops():
    """Defines the library once per process; returns torch.ops.shardproof."""
    global _LIB
    if _LIB is None:
        _LIB = torch.library.Library("shardproof", "DEF")
        for name, schema in SCHEMAS.items():
            _LIB.define(schema)
            for key in ("CPU", "Meta"):
                _LIB.impl(name, _shape_impl(name), key)
    return torch.ops.shardproof
