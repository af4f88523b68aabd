"""Assembles the plan: the logical graph from the logical trace, the parallel graph from
every rank's trace, lineage on inputs and updated parameters (and gradient claims), and
one plan collective per matched set of rank-local calls."""
from collections import defaultdict

from .errors import CaptureError
from .lowering import Lowerer
from .lowering.core import GraphBuilder, V
from .plan_text import TemplateText, Unshareable, plan_chunks
from .scaled_claims import scaled_reductions
from .rank_template import RankTemplates

PARAM, BUFFER, BATCH = "param", "buffer", "batch"


def logical_name(kind, name):
    return {PARAM: name, BUFFER: f"buffer:{name}", BATCH: f"batch:{name}"}[kind]


def next_name(name):
    return f"{name}.next"


def grad_name(name):
    return f"grad:{name}"


class RankProgram:
    """What plan_writer needs of one rank: its trace (shared between ranks whose programs
    are the same), its groups resolved to ranks, and the blocks of each input."""

    def __init__(self, rank, trace, group_ranks, blocks):
        self.rank = rank
        self.trace = trace
        self.group_ranks = group_ranks  # gid -> list of ranks
        self.blocks = blocks            # (kind, name) -> [(dim, lo, hi, box)]


def _fresh_tensor(L, v: V, base):
    """A new tensor equal to v (for a claim or an output name that v cannot carry)."""
    return L.emit("scale", [v], v.shape, v.dtype, {"factor": 1}, base=base)


def write_logical(trace, emit_src, claim_grads):
    b = GraphBuilder(parallel=False, emit_src=emit_src)
    L = Lowerer(trace, b, "", None)
    for inp in trace.inputs:
        meta = trace.nodes[inp.node].outs[0]
        v = b.declare(logical_name(inp.kind, inp.name), meta.shape, meta.dtype)
        b.inputs.append(v.name)
        L.bind_input(inp.node, v)
    roots = list(trace.updated.values()) + (list(trace.grads.values()) if claim_grads else [])
    L.run(roots)
    used = set(b.inputs)
    grads = {}
    if claim_grads:
        for name, ref in trace.grads.items():
            v = L.result(ref)
            if v.name in used:
                v = _fresh_tensor(L, v, grad_name(name))
            else:
                b.rename(v.name, grad_name(name))
                v = V(grad_name(name), v.shape, v.dtype)
            used.add(v.name)
            grads[name] = v
    for name, ref in trace.updated.items():
        v = L.result(ref)
        if v.name in used:
            v = _fresh_tensor(L, v, next_name(name))
        elif v.name != next_name(name):
            b.rename(v.name, next_name(name))
        used.add(next_name(name))
        b.outputs.append(next_name(name))
    return b, set(grads)


def _claim(b, name, of):
    b.tensors[name]["of"] = of


def _pieces(L, v, blocks, base):
    """v cut into the blocks of its layout (one piece: v itself)."""
    if len(blocks) == 1:
        return [v]
    dim = blocks[0][0]
    sizes = [hi - lo for _, lo, hi, _ in blocks]
    metas = []
    for s in sizes:
        shape = list(v.shape)
        shape[dim] = s
        metas.append((shape, v.dtype))
    return L.emit_multi("split", [v], metas, {"dim": dim, "sizes": sizes}, base=base)


def lower_rank(prog: RankProgram, b: GraphBuilder, logical_grads, origins=None):
    """Lowers one rank's trace into b; `origins` (if given) records, for each tensor that
    claims lineage, which block of which input or parameter its claim is (rank_template.py
    re-targets those claims per rank)."""
    r = prog.rank
    origins = {} if origins is None else origins
    trace = prog.trace
    L = Lowerer(trace, b, f"r{r}/", r)
    used = set()
    for inp in trace.inputs:
        meta = trace.nodes[inp.node].outs[0]
        lname = logical_name(inp.kind, inp.name)
        blocks = prog.blocks[(inp.kind, inp.name)]
        local = f"r{r}/{lname}"
        if len(blocks) == 1:
            v = b.declare(local, meta.shape, meta.dtype, rank=r,
                          of={"tensor": lname, "slice": blocks[0][3]})
            origins[v.name] = ((inp.kind, inp.name), 0)
            b.inputs.append(v.name)
        else:
            pieces = []
            for s, (dim, lo, hi, box) in enumerate(blocks):
                shape = list(meta.shape)
                shape[dim] = hi - lo
                p = b.declare(f"{local}#{s}", shape, meta.dtype, rank=r,
                              of={"tensor": lname, "slice": box})
                origins[p.name] = ((inp.kind, inp.name), s)
                b.inputs.append(p.name)
                pieces.append(p)
            v = b.declare(local, meta.shape, meta.dtype, rank=r)
            b.add_op("concat", [p.name for p in pieces], [v.name], {"dim": blocks[0][0]},
                     rank=r)
        used.add(v.name)
        L.bind_input(inp.node, v)
    claim_grads = [n for n in trace.grads if n in logical_grads]
    roots = list(trace.updated.values()) + [trace.grads[n] for n in claim_grads]
    L.run(roots)

    def finish(name, v, target, output):
        # the rank's tensor for `target` is named "r{r}/target" (the Lowerer adds the prefix)
        blocks = prog.blocks[(PARAM, name)]
        if len(blocks) == 1:
            full = L.prefix + target
            if v.name in used or v.name in b.inputs:
                v = _fresh_tensor(L, v, target)
            elif not v.name.startswith(full):
                b.rename(v.name, full)
                v = V(full, v.shape, v.dtype)
            pieces = [v]
        else:
            pieces = _pieces(L, v, blocks, target)
        for s, (p, (_, _, _, box)) in enumerate(zip(pieces, blocks)):
            _claim(b, p.name, {"tensor": target, "slice": box})
            origins[p.name] = ((PARAM, name), s)
            used.add(p.name)
            if output:
                b.outputs.append(p.name)
        return pieces

    for name in claim_grads:
        finish(name, L.result(trace.grads[name]), grad_name(name), False)
    for name, ref in trace.updated.items():
        finish(name, L.result(ref), next_name(name), True)
    return L.collectives


def _where(c):
    s = c.src
    return f"{s['file']}:{s['line']}" if s else "an unknown line"


def _mismatch(text, a, b=None):
    s = (a or b).src
    return CaptureError("collective-mismatch", text, s and s["file"], s and s["line"])


def match_collectives(pending_by_rank, group_ranks_of, b: GraphBuilder):
    """Pairs the k-th call on a group across its members (program order) and emits one
    plan collective per set; a rank whose calls do not line up with its peers' is a
    finding naming both lines."""
    queues = defaultdict(lambda: defaultdict(list))  # group tuple -> rank -> calls
    sends = defaultdict(list)   # (src, dst) -> send calls on src
    recvs = defaultdict(list)   # (src, dst) -> recv calls on dst
    for r, calls in pending_by_rank.items():
        for c in calls:
            if c.kind == "send":
                sends[(r, c.peer)].append(c)
            elif c.kind == "recv":
                recvs[(c.peer, r)].append(c)
            else:
                g = tuple(group_ranks_of[r][c.gid])
                queues[g][r].append(c)
    count = 0
    for g, by_rank in queues.items():
        longest = max(len(calls) for calls in by_rank.values())
        for k in range(longest):
            members = []
            for r in g:
                calls = by_rank.get(r, [])
                if k >= len(calls):
                    other = next(by_rank[q][k] for q in g if len(by_rank.get(q, [])) > k)
                    raise _mismatch(
                        f"rank {other.rank} makes collective #{k + 1} on group {list(g)} "
                        f"({other.kind} at {_where(other)}), but rank {r} makes only "
                        f"{len(calls)} on that group"
                        + (f" (its last: {calls[-1].kind} at {_where(calls[-1])})" if calls
                           else ""), other)
                members.append(calls[k])
            first = members[0]
            for m in members[1:]:
                if (m.kind, m.attrs, m.inp.shape, m.inp.dtype) != \
                        (first.kind, first.attrs, first.inp.shape, first.inp.dtype):
                    raise _mismatch(
                        f"collective #{k + 1} on group {list(g)} differs between ranks: rank "
                        f"{first.rank} calls {first.kind} {first.attrs} on {first.inp.shape} at "
                        f"{_where(first)}, rank {m.rank} calls {m.kind} {m.attrs} on "
                        f"{m.inp.shape} at {_where(m)}", m, first)
            count += 1
            b.add_op(first.kind, [m.inp.name for m in members], [m.out.name for m in members],
                     first.attrs, first.src, group=list(g), name=f"{first.kind}.{count}")
    for key in set(sends) | set(recvs):
        s_calls, r_calls = sends.get(key, []), recvs.get(key, [])
        for k in range(max(len(s_calls), len(r_calls))):
            if k >= len(s_calls) or k >= len(r_calls):
                have = (s_calls + r_calls)[0] if k >= len(s_calls) and k >= len(r_calls) else \
                    (s_calls[k] if k < len(s_calls) else r_calls[k])
                raise _mismatch(f"{have.kind} #{k + 1} from rank {key[0]} to rank {key[1]} at "
                                f"{_where(have)} has no matching "
                                f"{'recv' if have.kind == 'send' else 'send'}", have)
            s, rv = s_calls[k], r_calls[k]
            if (s.inp.shape, s.inp.dtype) != (rv.out.shape, rv.out.dtype):
                raise _mismatch(f"send at {_where(s)} of {s.inp.shape} meets recv at "
                                f"{_where(rv)} of {rv.out.shape}", rv, s)
            count += 1
            b.add_op("send", [s.inp.name], [rv.out.name], None, s.src, group=list(key),
                     name=f"send.{count}")


def claim_scaled_reductions(b: GraphBuilder):
    """--emit scale on the whole plan (scaled_reductions)."""
    b.apply_renames()
    producer_kind = {}
    for op in b.ops:
        for o in op["out"]:
            producer_kind[o] = op["op"]
    for src, (target, c) in scaled_reductions(b.ops, b.tensors, producer_kind).items():
        b.tensors[src]["of"] = dict(b.tensors[target]["of"], scale=c)


def write_plan(name, meta, logical_trace, programs, world, emit, claim_grads=True,
               share_lowering=True):
    """The plan. `share_lowering=False` lowers every rank on its own (rank_template.py's
    copies must equal that: tests compare the two)."""
    emit_src = "src" in emit
    lb, logical_grads = write_logical(logical_trace, emit_src, claim_grads)
    pb = GraphBuilder(parallel=True, emit_src=emit_src)
    pending = {}
    group_ranks_of = {}
    templates = RankTemplates(lambda prog, b, origins: lower_rank(prog, b, logical_grads,
                                                                  origins), emit_src)
    for prog in programs:
        pending[prog.rank] = templates.lower(prog, pb) if share_lowering else \
            lower_rank(prog, pb, logical_grads)
        group_ranks_of[prog.rank] = prog.group_ranks
    match_collectives(pending, group_ranks_of, pb)
    if "scale" in emit:
        claim_scaled_reductions(pb)
    return {"format": "shardproof-plan/1", "name": name, "meta": meta,
            "logical": lb.graph(), "parallel": pb.graph(world)}


def write_plan_text(name, meta, logical_trace, programs, world, emit, claim_grads=True):
    """The plan write_plan builds, as JSON text in pieces (plan_text.py), or None when a
    rank's part cannot be copied as text (then write_plan's plan is written)."""
    emit_src = "src" in emit
    lb, logical_grads = write_logical(logical_trace, emit_src, claim_grads)
    templates = RankTemplates(lambda prog, b, origins: lower_rank(prog, b, logical_grads,
                                                                  origins), emit_src)
    texts = {}  # id(template) -> its TemplateText
    ranks, pending, group_ranks_of = [], {}, {}
    for prog in programs:
        t = templates.template(prog)
        if id(t) not in texts:
            try:
                texts[id(t)] = TemplateText(t, "scale" in emit)
            except Unshareable:
                return None
        ranks.append((texts[id(t)], prog))
        pending[prog.rank] = t.calls_of(prog)
        group_ranks_of[prog.rank] = prog.group_ranks
    collectives = GraphBuilder(parallel=True, emit_src=emit_src)
    match_collectives(pending, group_ranks_of, collectives)
    head = {"format": "shardproof-plan/1", "name": name, "meta": meta, "logical": lb.graph()}
    return plan_chunks(head, ranks, collectives.ops, world)
