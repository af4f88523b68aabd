"""The launcher's environment as torchrun gives it to each rank, while a program is captured:
RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE (one node), GROUP_RANK and NODE_RANK (0).
Reading RANK or LOCAL_RANK is a read of every coordinate (as `ctx.rank` is), so a program that
picks its behaviour from them is traced per rank, never copied from another rank's trace.
Before, they were the capturing process's own (unset): every rank read the same default and a
rank-dependent learning rate was proven equivalent. The contract's way is `ctx`; this keeps
code written for torchrun honest."""
import contextlib
import os
from collections.abc import MutableMapping


class RankEnviron(MutableMapping):
    def __init__(self, real, ctx):
        self._real = real
        self._ctx = ctx
        world = str(ctx.world)
        self._fixed = {"WORLD_SIZE": world, "LOCAL_WORLD_SIZE": world, "GROUP_RANK": "0",
                       "NODE_RANK": "0"}
        self._rank = {"RANK", "LOCAL_RANK"}

    def __getitem__(self, key):
        if key in self._rank:
            self._ctx.log.read_all()
            return str(self._ctx.raw_rank())
        if key in self._fixed:
            return self._fixed[key]
        return self._real[key]

    def __contains__(self, key):
        return key in self._rank or key in self._fixed or key in self._real

    def __iter__(self):
        yield from self._rank
        yield from self._fixed
        for k in self._real:
            if k not in self._rank and k not in self._fixed:
                yield k

    def __len__(self):
        return sum(1 for _ in self)

    def __setitem__(self, key, value):
        self._real[key] = value

    def __delitem__(self, key):
        del self._real[key]

    def copy(self):
        return dict(self.items())

    def __repr__(self):
        return f"environ({self.copy()!r})"


@contextlib.contextmanager
def rank_environment(ctx):
    real = os.environ
    os.environ = RankEnviron(real, ctx)
    try:
        yield
    finally:
        os.environ = real
