"""One lowering per distinct rank trace. The first rank that runs a trace is lowered into a
template; every other rank with the same trace and the same block structure is a copy of it
with its own name prefix, rank number and lineage. The lowering is a function of the trace
alone: names, ranks and the boxes of claims are its only per-rank parts (collective peers
are absolute ranks, and a trace that names one is never shared: fake_dist.py). So 64 ranks
sharing 8 traces are lowered 8 times, not 64, and the plan is the same as lowering each."""
from dataclasses import replace

from .lowering.core import GraphBuilder


def rank_prefix(rank):
    return f"r{rank}/"


def block_structure(prog):
    """What of a rank's blocks the lowering reads: each input's pieces, not their boxes."""
    return tuple(sorted((key, tuple((dim, lo, hi) for dim, lo, hi, _ in blocks))
                        for key, blocks in prog.blocks.items()))


class _Template:
    def __init__(self, prog, builder, renames, origins, calls):
        self.prefix = rank_prefix(prog.rank)
        self.structure = block_structure(prog)
        self.b = builder
        self.renames = renames
        self.origins = origins  # tensor name -> ((kind, name), block index)
        self.calls = calls

    def namer(self, rank):
        """Template tensor name (before or after renames) -> rank `rank`'s name."""
        old, new = self.prefix, rank_prefix(rank)
        cut = len(old)

        def name(n):
            n = self.renames.get(n, n)
            if not n:
                return n  # a recv's unread buffer has no name
            assert n.startswith(old), f"rank tensor {n!r} outside its rank's prefix {old!r}"
            return new + n[cut:]
        return name

    def calls_of(self, prog):
        """Rank prog.rank's pending calls."""
        name, rank = self.namer(prog.rank), prog.rank
        return [replace(c, inp=replace(c.inp, name=name(c.inp.name)),
                        out=c.out and replace(c.out, name=name(c.out.name)), rank=rank)
                for c in self.calls]

    def instantiate(self, prog, out: GraphBuilder):
        """Copies the template into `out` as rank prog.rank; returns its pending calls."""
        name, rank = self.namer(prog.rank), prog.rank

        for n, decl in self.b.tensors.items():
            copy = dict(decl)
            if "rank" in copy:
                copy["rank"] = rank
            if n in self.origins:
                key, index = self.origins[n]
                copy["of"] = dict(decl["of"], slice=prog.blocks[key][index][3])
            out.tensors[name(n)] = copy
        for op in self.b.ops:
            copy = dict(op)
            copy["in"] = [name(n) for n in op["in"]]
            copy["out"] = [name(n) for n in op["out"]]
            if "rank" in copy:
                copy["rank"] = rank
            out.ops.append(copy)
        out.inputs.extend(name(n) for n in self.b.inputs)
        out.outputs.extend(name(n) for n in self.b.outputs)
        return self.calls_of(prog)


class RankTemplates:
    """`lower(prog, b)` adds rank prog.rank to b, lowering its trace only the first time."""

    def __init__(self, lower_rank, emit_src):
        self._lower_rank = lower_rank  # (prog, builder, origins) -> pending calls
        self._emit_src = emit_src
        self._templates = {}  # id(trace) -> [_Template]

    def lower(self, prog, out: GraphBuilder):
        return self.template(prog).instantiate(prog, out)

    def template(self, prog):
        """The template rank prog.rank copies (lowered now if it is the first)."""
        candidates = self._templates.setdefault(id(prog.trace), [])
        structure = block_structure(prog)
        template = next((t for t in candidates if t.structure == structure), None)
        if template is None:
            b = GraphBuilder(parallel=True, emit_src=self._emit_src)
            origins = {}
            calls = self._lower_rank(prog, b, origins)
            renames = dict(b._renames)
            b.apply_renames()
            origins = {renames.get(n, n): o for n, o in origins.items()}
            template = _Template(prog, b, renames, origins, calls)
            candidates.append(template)
        return template
