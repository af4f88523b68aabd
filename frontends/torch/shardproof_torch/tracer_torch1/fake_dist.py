"""torch.distributed, replaced during capture: every collective becomes one of the
`shardproof` ops (library.py) on its group, in-place collectives write their result back
with copy_ (which functionalization turns into plain data flow), and rank queries answer
from the instrumented ctx.

torch.distributed is invisible to autograd: its kernels write the tensors' memory. So the
write-back is not recorded by autograd either (`_write_back`): a tensor all-reduced in place
keeps its autograd history (its gradient passes the collective as the identity), and an
output buffer gets no history from the collective's input (no gradient flows back through an
all-gather). Recorded, the copy_ would cut the gradient at every in-place collective of a
tracked tensor (a row-parallel sum all-reduced in forward without an autograd.Function),
and only on ranks whose group has more than one member."""
import contextlib

import torch
import torch.distributed as dist
import torch.nn.parallel

from ..context import Group
from ..errors import CaptureError
from .library import ops
from .source import user_src

_REDUCE_NAMES = None


def _reduce_name(op):
    global _REDUCE_NAMES
    if _REDUCE_NAMES is None:
        R = dist.ReduceOp
        _REDUCE_NAMES = [(R.SUM, "sum"), (R.MAX, "max")]
        if hasattr(R, "AVG"):
            _REDUCE_NAMES.append((R.AVG, "mean"))
    for value, name in _REDUCE_NAMES:
        if op == value:
            return name
    shown = next((n for n in ("PRODUCT", "MIN", "BAND", "BOR", "BXOR", "PREMUL_SUM")
                  if hasattr(dist.ReduceOp, n) and op == getattr(dist.ReduceOp, n)), op)
    raise _error("collective-op", f"reduce op {shown} is not supported (SUM, MAX, AVG are)")


def _write_back(out, value):
    """out <- value as a collective writes it: outside autograd (see the module's doc)."""
    with torch.no_grad():
        out.copy_(value)


def _error(rule, text):
    src = user_src(3)
    return CaptureError(rule, text, src and src["file"], src and src["line"])


class _Work:
    def wait(self, *args, **kwargs):
        return True

    def is_completed(self):
        return True


class FakeDistributed:
    """Installs itself over torch.distributed for one program's capture."""

    def __init__(self, ctx):
        self.ctx = ctx
        self._saved = []

    # ---- groups and ranks

    def _group(self, group):
        g = group if group is not None else self.ctx.world_group
        if not isinstance(g, Group):
            raise _error("collective-group", f"group {g!r} is not one of ctx.groups or new_group()")
        table = self.ctx.groups_table
        if not (g.gid < len(table) and table[g.gid] is g):
            raise _error("collective-group", f"group {g!r} was made while another program was "
                         "captured (state kept outside the harness and the modules beside it?): "
                         "use ctx.groups or new_group() in this program")
        if self.ctx.raw_rank() not in g.current_ranks:
            raise _error("collective-group", f"rank {self.ctx.raw_rank()} calls a collective on "
                         f"group {g.current_ranks}, of which it is not a member")
        return g

    def get_rank(self, group=None):
        if group is None:
            return self.ctx.rank
        return self.ctx.index_in(self._group(group))

    def get_world_size(self, group=None):
        return self._group(group).size()

    def new_group(self, ranks=None, *args, **kwargs):
        ranks = list(range(self.ctx.world)) if ranks is None else [int(r) for r in ranks]
        return self.ctx.explicit_group(ranks)

    # ---- collectives

    def _finish(self, async_op):
        return _Work() if async_op else None

    def all_reduce(self, tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        g = self._group(group)
        red = _reduce_name(op)
        if g.size() > 1:
            _write_back(tensor, ops().all_reduce(tensor, red, g.gid))
        return self._finish(async_op)

    def all_gather(self, tensor_list, tensor, group=None, async_op=False):
        g = self._group(group)
        if len(tensor_list) != g.size():
            raise _error("collective-shape", f"all_gather into {len(tensor_list)} tensors on a "
                         f"group of {g.size()}")
        if g.size() == 1:
            _write_back(tensor_list[0], tensor)
        else:
            stacked = ops().all_gather(tensor, g.size(), g.gid)
            for i, out in enumerate(tensor_list):
                _write_back(out, stacked[i])
        return self._finish(async_op)

    def all_gather_into_tensor(self, output_tensor, input_tensor, group=None, async_op=False):
        g = self._group(group)
        if output_tensor.numel() != input_tensor.numel() * g.size():
            raise _error("collective-shape", "all_gather_into_tensor: output size "
                         f"{list(output_tensor.shape)} is not {g.size()} x input "
                         f"{list(input_tensor.shape)}")
        if g.size() == 1:
            _write_back(output_tensor, input_tensor.reshape(output_tensor.shape))
        else:
            stacked = ops().all_gather(input_tensor, g.size(), g.gid)
            _write_back(output_tensor, stacked.reshape(output_tensor.shape))
        return self._finish(async_op)

    def reduce_scatter_tensor(self, output, input, op=dist.ReduceOp.SUM, group=None,
                              async_op=False):
        g = self._group(group)
        red = _reduce_name(op)
        if input.dim() == 0 or input.shape[0] % g.size() or \
                input.numel() != output.numel() * g.size():
            raise _error("collective-shape", f"reduce_scatter_tensor: input {list(input.shape)} "
                         f"does not cut into {g.size()} pieces of {list(output.shape)} along dim 0")
        if g.size() == 1:
            _write_back(output, input.reshape(output.shape))
        else:
            _write_back(output, ops().reduce_scatter(input, red, g.size(), g.gid)
                        .reshape(output.shape))
        return self._finish(async_op)

    def all_to_all_single(self, output, input, output_split_sizes=None, input_split_sizes=None,
                          group=None, async_op=False):
        g = self._group(group)
        for sizes in (output_split_sizes, input_split_sizes):
            if sizes is not None and len(set(int(s) for s in sizes)) > 1:
                raise _error("collective-split", "all_to_all_single with unequal splits is not "
                             "supported (v1: equal splits only)")
        if input.shape[0] % g.size():
            raise _error("collective-shape", f"all_to_all_single: dim 0 of {list(input.shape)} "
                         f"does not cut into {g.size()} pieces")
        if g.size() == 1:
            _write_back(output, input)
        else:
            _write_back(output, ops().all_to_all(input, g.size(), g.gid))
        return self._finish(async_op)

    def broadcast(self, tensor, src, group=None, async_op=False):
        g = self._group(group)
        if src not in g.current_ranks:
            raise _error("collective-group", f"broadcast from rank {src}, not in the group "
                         f"{g.current_ranks}")
        if g.size() > 1:
            _write_back(tensor, ops().broadcast(tensor, g.current_ranks.index(src), g.gid))
        return self._finish(async_op)

    def send(self, tensor, dst, group=None, tag=0):
        self._peer(dst, group)
        ops().send(tensor, int(dst), -1)

    def recv(self, tensor, src=None, group=None, tag=0):
        if src is None:
            raise _error("collective-peer", "recv without src is not supported")
        self._peer(src, group)
        _write_back(tensor, ops().recv(tensor, int(src), -1))
        return src

    def isend(self, tensor, dst, group=None, tag=0):
        self.send(tensor, dst, group, tag)
        return _Work()

    def irecv(self, tensor, src=None, group=None, tag=0):
        self.recv(tensor, src, group, tag)
        return _Work()

    def _peer(self, peer, group):
        # torch 1.13: the peer is a global rank, a group only restricts it
        if group is not None and int(peer) not in self._group(group).current_ranks:
            raise _error("collective-peer", f"send/recv peer {peer} (a global rank) is not in "
                         f"the group {self._group(group).current_ranks}")
        if not 0 <= int(peer) < self.ctx.world or int(peer) == self.ctx.raw_rank():
            raise _error("collective-peer", f"send/recv peer {peer} is not another rank of "
                         f"{self.ctx.world}")
        self.ctx.log.read_all()  # a peer is an absolute rank: no re-use across ranks

    def batch_isend_irecv(self, p2p_op_list):
        """Megatron's pipeline schedules: a list of P2POp(isend/irecv, tensor, peer, group)."""
        works = []
        for op in p2p_op_list:
            fn = getattr(op, "op", None)
            name = getattr(fn, "__name__", "")
            if name not in ("isend", "irecv"):
                raise _error("collective-unsupported", f"batch_isend_irecv of {fn!r}: only "
                             "isend and irecv are supported")
            self.isend(op.tensor, op.peer, op.group, op.tag) if name == "isend" else \
                self.irecv(op.tensor, op.peer, op.group, op.tag)
            works.append(_Work())
        return works

    def barrier(self, group=None, async_op=False, device_ids=None):
        return self._finish(async_op)

    # ---- installation

    def _patches(self):
        names = ["get_rank", "get_world_size", "new_group", "all_reduce", "all_gather",
                 "all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single",
                 "broadcast", "send", "recv", "isend", "irecv", "batch_isend_irecv", "barrier"]
        table = {n: getattr(self, n) for n in names}
        table.update({
            "is_initialized": lambda: True,
            "is_available": lambda: True,
            "init_process_group": self._refuse_init,
            "destroy_process_group": lambda *a, **k: None,
            "get_backend": lambda *a, **k: "shardproof",
        })
        for name in ("reduce", "gather", "scatter", "all_to_all", "reduce_scatter",
                     "all_gather_object", "broadcast_object_list", "all_reduce_coalesced"):
            table[name] = self._unsupported(name)
        return table

    @staticmethod
    def _refuse_init(*args, **kwargs):
        # The contract: the front end initialises torch.distributed; is_initialized() is
        # True, so code that initialises only when needed never gets here.
        raise _error("harness-contract", "torch.distributed.init_process_group is called by "
                     "the program: shardproof initialises torch.distributed itself and gives "
                     "each rank its groups in ctx.groups (guard the call with "
                     "`if not dist.is_initialized()`)")

    def _unsupported(self, name):
        def refuse(*args, **kwargs):
            raise _error("collective-unsupported", f"torch.distributed.{name} is not supported "
                         "by the capture (docs/torch-harness.md lists the collectives)")
        return refuse

    @staticmethod
    def _wrapper_refused(name):
        def refuse(*args, **kwargs):
            raise _error("collective-bypass", f"{name} reduces gradients in C++, outside "
                         "torch.distributed's Python API, so the capture cannot see it; keep the "
                         "plain module and all-reduce the gradients in finalize_grads "
                         "(docs/torch-harness.md)")
        return refuse

    def _wrapper_patches(self):
        """(owner, attribute, replacement) for the wrappers that bypass torch.distributed."""
        out = [(torch.nn.parallel.DistributedDataParallel, "__init__",
                self._wrapper_refused("DistributedDataParallel"))]
        import sys
        fsdp = sys.modules.get("torch.distributed.fsdp")  # importing it may fail (py3.11)
        if fsdp is not None and hasattr(fsdp, "FullyShardedDataParallel"):
            out.append((fsdp.FullyShardedDataParallel, "__init__",
                        self._wrapper_refused("FullyShardedDataParallel")))
        return out

    @contextlib.contextmanager
    def installed(self):
        import torch.distributed.distributed_c10d as c10d
        modules = [dist, c10d]
        for name, fn in self._patches().items():
            for m in modules:
                self._saved.append((m, name, m.__dict__.get(name, _MISSING)))
                setattr(m, name, fn)
        for owner, name, fn in self._wrapper_patches():
            self._saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
            setattr(owner, name, fn)
        try:
            yield self
        finally:
            for m, name, old in reversed(self._saved):
                if old is _MISSING:
                    delattr(m, name)
                else:
                    setattr(m, name, old)
            self._saved.clear()


_MISSING = object()
