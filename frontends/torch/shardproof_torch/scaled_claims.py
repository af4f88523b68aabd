"""Scaled claims from DDP averaging (docs/torch-harness.md, "--emit scale"): the one rule both
plan writers apply, on the whole plan (plan_writer.py) and on one rank's template
(plan_text.py)."""
from .lowering.numbers import as_fraction


def scaled_reductions(ops, tensors, producer_kind):
    """The rule of --emit scale: an all-reduce whose output is only divided by c into a
    claimed tensor (DDP averaging) claims `c x` that tensor's lineage. `producer_kind`: tensor
    -> the kind of op that writes it. Returns {all-reduce output: (claimed tensor, c)}, in op
    order, as if each claim were added when found (a tensor claimed so takes no second one)."""
    has_of = {n for n, decl in tensors.items() if "of" in decl}
    out = {}
    for op in ops:
        if op["op"] != "scale":
            continue
        # Ops whose tensors were renamed or dropped on the way declare nothing
        # here: they claim nothing (a claim is only ever an addition).
        target = tensors.get(op["out"][0])
        src = op["in"][0]
        if target is None or src not in tensors:
            continue
        if "of" not in target or src in has_of or producer_kind.get(src) != "all_reduce":
            continue
        factor = as_fraction(op["attrs"]["factor"])
        if factor == 0 or "scale" in target["of"] or op["out"][0] in out:
            continue
        c = 1 / factor
        out[src] = (op["out"][0], str(c) if c.denominator > 1 else int(c))
        has_of.add(src)
    return out
