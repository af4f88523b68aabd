"""`ctx` as the harness sees it, instrumented: it records which coordinates the rank
program reads. Two ranks that agree on every coordinate their program read run the same
program (up to which ranks its groups name), so one trace serves both (docs/torch-harness.md,
"One trace per distinct rank program")."""
from typing import Dict, FrozenSet, Optional

from .mesh import Mesh


class ReadLog:
    """The axes whose coordinate the program has looked at, directly or through
    rank numbers and group membership."""

    def __init__(self, mesh: Mesh):
        self.mesh = mesh
        self.axes = set()

    def read(self, axes):
        self.axes.update(axes)

    def read_all(self):
        self.axes.update(self.mesh.names)

    def key(self, coords: Dict[str, int]) -> FrozenSet:
        return frozenset((a, coords[a]) for a in self.axes)


class Group:
    """Stands in for a torch.distributed ProcessGroup. `axes` names a mesh line relative
    to the rank (re-targeted when a trace is re-used); `ranks` is set for explicit groups
    from `new_group(ranks)`, which stay absolute."""

    def __init__(self, gid, axes=None, ranks=None, current_ranks=None):
        self.gid = gid
        self.axes = tuple(axes) if axes is not None else None
        self.ranks = list(ranks) if ranks is not None else None
        self.current_ranks = list(current_ranks)  # members as seen by the rank being traced

    def size(self):
        return len(self.current_ranks)

    def descriptor(self):
        if self.axes is not None:
            return {"axes": list(self.axes)}
        return {"ranks": self.ranks}

    def __repr__(self):
        return f"<shardproof group {self.descriptor()}>"

    def __getattr__(self, name):
        # ProcessGroup methods (allreduce, broadcast, ...) bypass torch.distributed's API
        if name.startswith("__"):
            raise AttributeError(name)
        from .errors import CaptureError
        from .tracer_torch1.source import user_src
        src = user_src(2)
        raise CaptureError("collective-bypass", f"process group method `{name}` called "
                           "directly: collectives must go through torch.distributed "
                           "(all_reduce, all_gather, ...)", src and src["file"],
                           src and src["line"])


class LoggedDict(dict):
    """A dict whose every read of a value is logged (`_read(keys)`); its keys, the axis
    names, are the same on every rank and are not. Every dict method that hands out
    values is overridden, and so is `__iter__`: a dict subclass with its own iterator is
    copied by CPython through `keys()` and `__getitem__` (`dict(d)`, `{**d}`,
    `dict.update`), never by the silent fast path that copies the values directly.
    Writes are refused: a harness that edits ctx would edit what later reads see."""

    def _read(self, keys):
        raise NotImplementedError

    def _read_all(self):
        self._read(list(dict.keys(self)))

    def __getitem__(self, key):
        if dict.__contains__(self, key):
            self._read([key])
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        if dict.__contains__(self, key):
            self._read([key])
        return dict.get(self, key, default)

    def __iter__(self):
        return dict.__iter__(self)

    def items(self):
        self._read_all()
        return dict.items(self)

    def values(self):
        self._read_all()
        return dict.values(self)

    def copy(self):
        self._read_all()
        return dict(dict.items(self))

    __copy__ = copy

    def __deepcopy__(self, memo):
        import copy
        return copy.deepcopy(self.copy(), memo)

    def __reduce_ex__(self, protocol):
        return (dict, (self.copy(),))

    def __repr__(self):
        self._read_all()
        return dict.__repr__(self)

    __str__ = __repr__

    def __eq__(self, other):
        self._read_all()
        return dict.__eq__(self, other)

    def __ne__(self, other):
        self._read_all()
        return dict.__ne__(self, other)

    def __or__(self, other):
        return self.copy() | other

    def __ror__(self, other):
        return other | self.copy()

    def _refuse(self, *args, **kwargs):
        from .errors import CaptureError
        from .tracer_torch1.source import user_src
        src = user_src(2)
        raise CaptureError("harness-contract", "ctx.coords and ctx.group_ranks are read-only "
                           "(copy them with dict(...) to edit)", src and src["file"],
                           src and src["line"])

    __setitem__ = __delitem__ = __ior__ = _refuse
    pop = popitem = setdefault = update = clear = _refuse

    __hash__ = None


class LoggedCoords(LoggedDict):
    """axis -> this rank's coordinate."""

    def __init__(self, coords, log):
        super().__init__(coords)
        self._log = log

    def _read(self, keys):
        self._log.read(keys)


class LoggedGroupRanks(LoggedDict):
    """axis -> global ranks of that line: depends on every other coordinate."""

    def __init__(self, ranks, mesh, log):
        super().__init__(ranks)
        self._mesh = mesh
        self._log = log

    def _read(self, keys):
        self._log.read([a for a in self._mesh.names if any(a != k for k in keys)])


class RankContext:
    """ctx.rank, ctx.world, ctx.mesh, ctx.coords, ctx.groups, ctx.group_ranks."""

    def __init__(self, mesh: Mesh, rank: int, groups_table):
        self._mesh = mesh
        self._rank = rank
        self.log = ReadLog(mesh)
        self.groups_table = groups_table  # list of Group, index = gid
        self.world = mesh.world
        self.mesh = dict(mesh.sizes)
        self.coords = LoggedCoords(mesh.coords(rank), self.log)
        self.groups = {a: self.axis_group((a,)) for a in mesh.names}
        self.group_ranks = LoggedGroupRanks(
            {a: mesh.group_ranks(rank, (a,)) for a in mesh.names}, mesh, self.log)
        self.world_group = self.axis_group(tuple(mesh.names))

    @property
    def rank(self):
        self.log.read_all()
        return self._rank

    def raw_rank(self):
        """The rank, without logging a read (for the front end's own use)."""
        return self._rank

    def axis_group(self, axes):
        g = Group(len(self.groups_table), axes=axes,
                  current_ranks=self._mesh.group_ranks(self._rank, axes))
        self.groups_table.append(g)
        return g

    def explicit_group(self, ranks):
        g = Group(len(self.groups_table), ranks=sorted(ranks), current_ranks=sorted(ranks))
        self.groups_table.append(g)
        return g

    def index_in(self, group: Optional[Group]):
        """This rank's position in `group`; logs the coordinates that decide it."""
        group = group or self.world_group
        if group.axes is not None:
            self.log.read(group.axes)
        else:
            self.log.read_all()
        return group.current_ranks.index(self._rank)

    def __repr__(self):
        return f"<shardproof ctx rank={self._rank} mesh={self.mesh}>"
