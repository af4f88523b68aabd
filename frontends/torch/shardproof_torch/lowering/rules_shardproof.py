"""The front end's own ops: collectives (left pending for plan_writer to match across the
members of each group) and optimizer steps (the plan's `sgd` and `adam`, first step from
zero state)."""
from fractions import Fraction

from .core import PendingCollective, V, rule
from .numbers import as_fraction, exact


def _pending(L, kind, x, out_shape, gid, attrs=None, peer=None):
    out = None if kind == "send" else L.b.declare(L._name(kind), out_shape, x.dtype, rank=L.rank)
    if L.rank is None:
        raise L.error("internal", "a collective in the logical program")
    L.collectives.append(PendingCollective(kind, gid, attrs or {}, x, out, L.node.src, L.rank,
                                           peer))
    return out


@rule("shardproof.all_reduce.default")
def all_reduce(L, x, reduce, gid):
    return _pending(L, "all_reduce", x, x.shape, gid, {"reduce": reduce})


@rule("shardproof.all_gather.default")
def all_gather(L, x, n, gid):
    one = L.reshape(x, [1] + x.shape)
    return _pending(L, "all_gather", one, [n] + x.shape, gid, {"dim": 0})


@rule("shardproof.reduce_scatter.default")
def reduce_scatter(L, x, reduce, n, gid):
    shape = [x.shape[0] // n] + x.shape[1:]
    return _pending(L, "reduce_scatter", x, shape, gid, {"dim": 0, "reduce": reduce})


@rule("shardproof.all_to_all.default")
def all_to_all(L, x, n, gid):
    return _pending(L, "all_to_all", x, x.shape, gid, {"split_dim": 0, "concat_dim": 0})


@rule("shardproof.broadcast.default")
def broadcast(L, x, root, gid):
    return _pending(L, "broadcast", x, x.shape, gid, {"root": root})


@rule("shardproof.send.default")
def send(L, x, peer, gid):
    _pending(L, "send", x, x.shape, gid, peer=peer)
    return None


@rule("shardproof.recv.default")
def recv(L, x, peer, gid):
    # The received value is produced by the matching send; the buffer `x` is not read (it
    # may be torch.empty): only the shape counts.
    meta = L.out_meta()
    return _pending(L, "recv", V("", meta.shape, meta.dtype), meta.shape, gid, peer=peer)


@rule("shardproof.mark_step_grad.default")
def mark_step_grad(L, x, index):
    return x


@rule("shardproof.sgd_step.default")
def sgd_step(L, p, g, lr, momentum, weight_decay, nesterov, maximize):
    # First step: the momentum buffer is the gradient itself (dampening does not apply),
    # so p' = p - lr * (1 + momentum if nesterov else 1) * (g + wd * p).
    if weight_decay:
        g = L.binary("add", g, L.scale(p, weight_decay), p.dtype, p.shape)
    factor = as_fraction(exact(lr))
    if nesterov and momentum:
        factor *= 1 + as_fraction(exact(momentum))
    if maximize:
        factor = -factor
    return L.emit("sgd", [p, g], p.shape, p.dtype, {"lr": _num(factor)})


@rule("shardproof.adam_step.default")
def adam_step(L, p, g, lr, beta1, beta2, eps, weight_decay, decoupled, maximize):
    if maximize:
        g = L.unary("neg", g)
    if weight_decay and not decoupled:  # Adam: L2 term in the gradient
        g = L.binary("add", g, L.scale(p, weight_decay), p.dtype, p.shape)
    zeros = L.const(0, p.shape, p.dtype)
    attrs = {"lr": exact(lr), "beta1": exact(beta1), "beta2": exact(beta2), "eps": exact(eps),
             "step": 1}
    if weight_decay and decoupled:
        attrs["weight_decay"] = exact(weight_decay)
    outs = L.emit_multi("adam", [p, g, zeros, zeros], [(p.shape, p.dtype)] * 3, attrs)
    return outs[0]


def _num(f: Fraction):
    return f.numerator if f.denominator == 1 else f"{f.numerator}/{f.denominator}"
