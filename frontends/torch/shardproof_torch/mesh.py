"""The device mesh: ordered axes, row-major rank numbering (last axis fastest)."""
from dataclasses import dataclass
from typing import Dict, List, Tuple

from .errors import CaptureError


@dataclass(frozen=True)
class Mesh:
    axes: Tuple[Tuple[str, int], ...]

    @property
    def names(self) -> List[str]:
        return [a for a, _ in self.axes]

    @property
    def sizes(self) -> Dict[str, int]:
        return dict(self.axes)

    @property
    def world(self) -> int:
        w = 1
        for _, n in self.axes:
            w *= n
        return w

    def coords(self, rank: int) -> Dict[str, int]:
        out = {}
        for name, n in reversed(self.axes):
            out[name] = rank % n
            rank //= n
        return {name: out[name] for name, _ in self.axes}

    def rank_of(self, coords: Dict[str, int]) -> int:
        r = 0
        for name, n in self.axes:
            r = r * n + coords.get(name, 0)
        return r

    def group_ranks(self, rank: int, group_axes) -> List[int]:
        """Ranks that share every coordinate of `rank` except those along `group_axes`,
        row-major over the group axes in mesh order."""
        base = self.coords(rank)
        members = [dict(base)]
        for name, n in self.axes:
            if name not in group_axes:
                continue
            members = [dict(m, **{name: i}) for m in members for i in range(n)]
        return sorted(self.rank_of(m) for m in members)

    def logical(self) -> "Mesh":
        """The one-rank mesh of the logical program: every axis of size 1."""
        return Mesh(tuple((a, 1) for a, _ in self.axes))


def parse_mesh_override(text: str) -> Dict[str, int]:
    """`dp=2,tp=4` -> {"dp": 2, "tp": 4}."""
    out = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, eq, size = item.partition("=")
        if not eq or not name.isidentifier() or not size.isdigit() or int(size) < 1:
            raise CaptureError("mesh", f"--mesh: expected axis=size[,axis=size...], got {text!r}")
        out[name] = int(size)
    return out


def mesh_from(declared: Dict[str, int], override: Dict[str, int],
              known=lambda axis: True, where=(None, None)) -> Mesh:
    """MESH with `--mesh` applied: sizes replaced, and axes added that `known(axis)` says the
    harness knows (else an error at `where`, the file and line of MESH)."""
    axes = [(a, int(n)) for a, n in declared.items()]
    names = [a for a, _ in axes]
    for a, n in override.items():
        if a in names:
            axes[names.index(a)] = (a, n)
        elif not known(a):
            raise CaptureError("harness-mesh", f"--mesh adds the axis {a!r}, which the "
                               f"harness's MESH ({', '.join(names)}) does not have and its "
                               "code never names: a typo? (--mesh may add only axes the "
                               "harness uses, e.g. through ctx.groups[...] or BATCH_LAYOUT)", *where)
        else:
            axes.append((a, n))
    return Mesh(tuple(axes))
