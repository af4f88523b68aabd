"""The plan as JSON text, written without building it: each rank template (rank_template.py)
is encoded once, with sentinels where a rank's copy differs (its name prefix, its rank number,
the boxes of its lineage claims), and every rank that copies it is that text with the
sentinels replaced. The text is exactly `json.dumps(plan, separators=(",", ":"))` of the plan
write_plan builds (tests/test_plan_text.py); a 64-rank plan of a 32-layer model is hundreds of
megabytes of dictionaries that this never holds.

The sentinels are control characters (JSON writes them as `\\u0000`, `\\u0001`, `\\u0002`),
which no tensor name, source file or attribute of a captured program holds. Each is counted
in the encoded text: a template whose text holds one more than it put there (a string of the
program that does hold one) is not copied this way (`Unshareable`), and the caller writes the
plan from dictionaries."""
import json
import re

from .scaled_claims import scaled_reductions

PREFIX, RANK, SLICE = "\x00", "\x01", "\x02"
_ENC_PREFIX, _ENC_RANK, _ENC_SLICE = "\\u0000", "\\u0001", "\\u0002"
_SLICE_SLOT = re.compile(r'"\\u0002(\d+)"')


class Unshareable(Exception):
    """A template's text cannot be copied by replacing sentinels."""


def dumps(value):
    return json.dumps(value, separators=(",", ":"))


def scaled_claims(template):
    """scaled_reductions (plan_writer.py) on one rank's part of the plan: tensor -> (the
    claimed tensor whose lineage it takes, its scale). A rank's claims depend on its own ops
    alone, and the tensor a collective call writes is produced by a plan op of the call's
    kind."""
    b = template.b
    producer_kind = {}
    for op in b.ops:
        for o in op["out"]:
            producer_kind[o] = op["op"]
    for c in template.calls:
        if c.out is not None:
            producer_kind[template.renames.get(c.out.name, c.out.name)] = c.kind
    return scaled_reductions(b.ops, b.tensors, producer_kind)


class TemplateText:
    """One template's tensors, inputs, ops and outputs as text with sentinels."""

    def __init__(self, template, scale):
        self.template = template
        cut = len(template.prefix)
        slots = []  # slot -> template tensor whose per-rank box fills it

        def name(n):
            if not n:
                return n
            assert n.startswith(template.prefix), n
            return PREFIX + n[cut:]

        def of_with_slot(n):
            decl = template.b.tensors[n]
            if n not in template.origins:
                return decl["of"]
            slots.append(n)
            return dict(decl["of"], slice=f"{SLICE}{len(slots) - 1}")

        scaled = scaled_claims(template) if scale else {}
        names = 0
        ranks = 0
        tensors = {}
        for n, decl in template.b.tensors.items():
            copy = dict(decl)
            if "rank" in copy:
                copy["rank"] = RANK
                ranks += 1
            if n in template.origins:
                copy["of"] = of_with_slot(n)
            if n in scaled:
                claimed, scale = scaled[n]
                copy["of"] = dict(of_with_slot(claimed), scale=scale)
            tensors[name(n)] = copy
            names += 1
        ops = []
        for op in template.b.ops:
            copy = dict(op)
            copy["in"] = [name(n) for n in op["in"]]
            copy["out"] = [name(n) for n in op["out"]]
            names += sum(1 for n in op["in"] + op["out"] if n)
            if "rank" in copy:
                copy["rank"] = RANK
                ranks += 1
            ops.append(copy)
        inputs = [name(n) for n in template.b.inputs]
        outputs = [name(n) for n in template.b.outputs]
        names += sum(1 for n in inputs + outputs if n)
        self.parts = [dumps(x)[1:-1] for x in (tensors, inputs, ops, outputs)]
        self.slots = slots
        text = "".join(self.parts)
        if text.count(_ENC_PREFIX) != names or text.count('"' + _ENC_PREFIX) != names or \
                text.count(_ENC_RANK) != ranks or text.count('"' + _ENC_RANK + '"') != ranks or \
                text.count(_ENC_SLICE) != len(slots) or \
                len(_SLICE_SLOT.findall(text)) != len(slots):
            raise Unshareable(template.prefix)

    def rank_part(self, prog, i):
        """Part i (0 tensors, 1 inputs, 2 ops, 3 outputs) of rank prog.rank, as text."""
        part = self.parts[i].replace('"' + _ENC_PREFIX, '"r%d/' % prog.rank)
        part = part.replace('"' + _ENC_RANK + '"', str(prog.rank))
        if self.slots and _ENC_SLICE in part:
            origins, blocks = self.template.origins, prog.blocks
            part = _SLICE_SLOT.sub(lambda m: dumps(blocks[origins[self.slots[int(
                m.group(1))]][0]][origins[self.slots[int(m.group(1))]][1]][3]), part)
        return part


def plan_chunks(head, ranks, collectives, world):
    """The plan's text in pieces: `head` is the plan without "parallel" (a dict), `ranks`
    the (TemplateText, RankProgram) of each rank in order, `collectives` the plan collective
    ops (dicts) that follow every rank's ops."""
    text = dumps(head)
    yield text[:-1] + ',"parallel":{"world":' + str(world) + ',"tensors":{'
    closes = ('},"inputs":[', '],"ops":[', '],"outputs":[', "]}}")
    for i, close in enumerate(closes):
        first = True
        for t, prog in ranks:
            part = t.rank_part(prog, i)
            if part:
                yield part if first else "," + part
                first = False
        if i == 2:
            for op in collectives:
                yield dumps(op) if first else "," + dumps(op)
                first = False
        yield close
