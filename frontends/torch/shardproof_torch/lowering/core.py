"""The lowering machinery: plan values, a graph builder, and the Lowerer that walks a
trace's live nodes and applies one rule per ATen op."""
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from ..errors import CaptureError, error_at
from ..trace import Ref, Trace
from .numbers import exact

RULES: Dict[str, Callable] = {}
# Ops that read only the shape of their tensor arguments: their inputs are not live
# through them (aten.fill on an empty_like is a constant, not a read of memory).
SHAPE_ONLY = {"aten.fill.Scalar", "aten.zeros_like.default", "aten.ones_like.default",
              "aten.full_like.default", "aten.new_zeros.default", "aten.new_ones.default",
              "aten.new_full.default", "aten.new_empty.default", "aten.empty_like.default",
              "aten.new_empty_strided.default", "aten.bernoulli.p", "aten.bernoulli.default",
              "aten.bernoulli.Tensor", "aten.bernoulli_.float", "aten.uniform.default",
              "aten.normal.default", "aten.zero.default",
              "shardproof.recv.default"}  # the received value comes from the matching send

COLLECTIVES = {f"shardproof.{k}.default" for k in (
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send", "recv")}


def unread_args(node):
    """Positions of tensor arguments whose values an op ignores: `addmm`/`baddbmm` with
    beta = 0 (Megatron's attention passes an uninitialized buffer there), and the
    destination of `copy` (only its shape matters). They are not live through the op."""
    if node.op in ("aten.addmm.default", "aten.baddbmm.default"):
        beta = node.kwargs.get("beta", node.args[3] if len(node.args) > 3 else 1)
        return {0} if beta == 0 else set()
    if node.op == "aten.copy.default":
        return {0}
    return set()


REAL = {"f32", "f16", "bf16", "f64"}
INT = {"i32", "i64"}


def dclass(dtype):
    return "real" if dtype in REAL else "int" if dtype in INT else "bool"


def rule(*names):
    def register(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return register


@dataclass
class V:
    """A plan tensor: its name, shape and dtype."""
    name: str
    shape: List[int]
    dtype: str


class GraphBuilder:
    """One plan graph (logical or parallel) under construction."""

    def __init__(self, parallel: bool, emit_src: bool):
        self.parallel = parallel
        self.emit_src = emit_src
        self.tensors: Dict[str, Dict[str, Any]] = {}
        self.ops: List[Dict[str, Any]] = []
        self.inputs: List[str] = []
        self.outputs: List[str] = []
        self._counts: Dict[str, int] = {}
        self._renames: Dict[str, str] = {}

    def fresh(self, base):
        n = self._counts.get(base, 0)
        self._counts[base] = n + 1
        name = base if n == 0 and base not in self.tensors else f"{base}.{n}"
        while name in self.tensors:
            n += 1
            self._counts[base] = n + 1
            name = f"{base}.{n}"
        return name

    def declare(self, name, shape, dtype, rank=None, of=None):
        decl = {"shape": list(shape), "dtype": dtype}
        if rank is not None:
            decl["rank"] = rank
        if of is not None:
            decl["of"] = of
        self.tensors[name] = decl
        return V(name, list(shape), dtype)

    def add_op(self, op, ins, outs, attrs=None, src=None, rank=None, group=None, name=None):
        entry = {"op": op, "in": list(ins), "out": list(outs)}
        if name:
            entry["name"] = name
        if attrs:
            entry["attrs"] = attrs
        if group is not None:
            entry["group"] = group
        elif rank is not None:
            entry["rank"] = rank
        if src is not None and self.emit_src:
            entry["src"] = src
        self.ops.append(entry)

    def rename(self, old, new):
        """Renames a tensor (applied to op lists once, in graph())."""
        self.tensors[new] = self.tensors.pop(old)
        self._renames[old] = new

    def graph(self, world=None):
        self.apply_renames()
        g = {}
        if world is not None:
            g["world"] = world
        g.update({"tensors": self.tensors, "inputs": self.inputs, "ops": self.ops,
                  "outputs": self.outputs})
        return g

    def apply_renames(self):
        if self._renames:
            r = self._renames
            for op in self.ops:
                op["in"] = [r.get(n, n) for n in op["in"]]
                op["out"] = [r.get(n, n) for n in op["out"]]
            self.inputs = [r.get(n, n) for n in self.inputs]
            self.outputs = [r.get(n, n) for n in self.outputs]
            self._renames = {}


@dataclass
class PendingCollective:
    """One rank's side of a collective; plan_writer matches the members."""
    kind: str
    gid: int
    attrs: Dict[str, Any]
    inp: V
    out: V
    src: Optional[Dict[str, Any]]
    rank: int
    peer: Optional[int] = None  # send/recv


class Lowerer:
    """Lowers the live part of one trace into `builder`, names prefixed by `prefix`."""

    def __init__(self, trace: Trace, builder: GraphBuilder, prefix: str, rank: Optional[int]):
        self.trace = trace
        self.b = builder
        self.prefix = prefix
        self.rank = rank
        self.env: Dict[Ref, Any] = {}
        self.collectives: List[PendingCollective] = []
        self.node = None  # the node being lowered (for names, sources and errors)
        # what rules know of a plan tensor beyond its value, by name: e.g. "sumsq" -> the
        # sum of squares whose sqrt it is (a 2-norm)
        self.facts: Dict[str, Dict[str, Any]] = {}

    # ---- values

    def bind_input(self, node_id, v: V):
        self.env[Ref(node_id, 0)] = v

    def value(self, a):
        """A trace argument -> V, a Python value, or a list of these."""
        if isinstance(a, Ref):
            if a not in self.env:
                raise self.error("internal", f"value {a} used before it is defined")
            v = self.env[a]
            if hasattr(v, "error"):  # an output its rule could not compute
                raise v.error
            return v
        if isinstance(a, list):
            return [self.value(x) for x in a]
        return a

    def result(self, ref):
        """A value the plan writes out (an updated parameter, a gradient): a plain tensor."""
        v = self.value(ref)
        if not isinstance(v, V):
            node = self.trace.nodes[ref.node]
            raise error_at(node.src, "infinity" if isinstance(v, neg_inf.NegInf) else "lowering",
                           f"{node.op}: a result of the step holds -inf (or no value); only "
                           "finite tensors can be compared")
        return v

    def out_meta(self, i=0):
        return self.node.outs[i]

    # ---- emitting ops

    def _name(self, base=None):
        base = base or (self.node.op.split(".")[1] if self.node else "t")
        return self.b.fresh(f"{self.prefix}{base}")

    def emit(self, op, ins, shape, dtype, attrs=None, base=None):
        out = self.b.declare(self._name(base), shape, dtype, rank=self.rank)
        self.b.add_op(op, [v.name for v in ins], [out.name], attrs, self._src(), self.rank)
        return out

    def _src(self):
        return self.node.src if self.node else None

    def emit_multi(self, op, ins, metas, attrs=None, base=None):
        outs = [self.b.declare(self._name(base), s, d, rank=self.rank) for s, d in metas]
        self.b.add_op(op, [v.name for v in ins], [o.name for o in outs], attrs, self._src(),
                      self.rank)
        return outs

    def const(self, value, shape, dtype):
        if isinstance(value, float) and value != value:
            raise self.error("infinity", f"{self.node.op if self.node else 'const'}: NaN "
                             "cannot be modelled over the reals")
        if neg_inf.is_inf_number(value):
            raise neg_inf.refuse(self)
        attrs = {"value": exact(value), "shape": list(shape), "dtype": dtype}
        return self.emit("const", [], shape, dtype, attrs, base="const")

    def iota(self, shape, dim):
        return self.emit("iota", [], shape, "i64", {"shape": list(shape), "dim": dim}, base="iota")

    def tensor(self, x, dtype, shape=()):
        """A trace value as a tensor: Python numbers become constants of `dtype`."""
        if isinstance(x, V):
            return x
        if isinstance(x, bool) and dtype != "bool":
            x = int(x)
        return self.const(x, list(shape), dtype)

    def cast(self, v: V, dtype):
        if dclass(v.dtype) == dclass(dtype):
            return v
        return self.emit("cast", [v], v.shape, dtype, {"dtype": dtype}, base="cast")

    def reshape(self, v: V, shape):
        shape = list(shape)
        if shape == v.shape:
            return v
        return self.emit("reshape", [v], shape, v.dtype, {"shape": shape}, base="reshape")

    def expand(self, v: V, shape):
        shape = list(shape)
        if shape == v.shape:
            return v
        return self.emit("expand", [v], shape, v.dtype, {"shape": shape}, base="expand")

    def scale(self, v: V, factor):
        if factor == 1:
            return v
        return self.emit("scale", [v], v.shape, v.dtype, {"factor": exact(factor)}, base="scale")

    def binary(self, op, a, b, dtype=None, shape=None):
        """Elementwise op on two trace values (tensors or numbers), NumPy broadcasting."""
        dtype = dtype or self.out_meta().dtype
        shape = shape if shape is not None else broadcast(a, b)
        operand_dtype = dtype if op not in ("eq", "lt", "le", "gt", "ge") else \
            _common_dtype(a, b)
        a = self.cast(self.tensor(a, operand_dtype), operand_dtype)
        b = self.cast(self.tensor(b, operand_dtype), operand_dtype)
        return self.emit(op, [a, b], shape, dtype)

    def unary(self, op, a, attrs=None, dtype=None):
        dtype = dtype or a.dtype
        return self.emit(op, [a], a.shape, dtype, attrs, base=op)

    def reduce(self, op, v, dims, keepdim):
        dims = sorted(set(d % len(v.shape) for d in dims)) if v.shape else []
        if not dims:
            return v
        shape = [1 if i in dims else n for i, n in enumerate(v.shape)] if keepdim else \
            [n for i, n in enumerate(v.shape) if i not in dims]
        attrs = {"dims": dims}
        if keepdim:
            attrs["keepdim"] = True
        return self.emit(op, [v], shape, v.dtype, attrs, base=op)

    # ---- errors

    def error(self, rule_id, text):
        return error_at(self.node.src if self.node else None, rule_id, text)

    def unsupported(self, text):
        return self.error("unsupported-op", f"{self.node.op}: {text}")

    # ---- the walk

    def live_nodes(self, roots: List[Ref]):
        live = set()
        stack = [r.node for r in roots]
        for n in self.trace.nodes:
            # every communication is lowered, used or not: its peers' calls pair with it
            if n.op in COLLECTIVES:
                stack.append(n.id)
        while stack:
            i = stack.pop()
            if i in live:
                continue
            live.add(i)
            node = self.trace.nodes[i]
            if node.op in SHAPE_ONLY:
                continue
            unread = unread_args(node)
            args = [a for i, a in enumerate(node.args) if i not in unread]
            for a in _refs(args) + _refs(list(node.kwargs.values())):
                stack.append(a.node)
        return live

    def run(self, roots: List[Ref]):
        live = self.live_nodes(roots)
        for node in self.trace.nodes:
            if node.id not in live or node.op == "input":
                continue
            self.node = node
            for m in node.outs:
                if m is not None and m.dtype.startswith("unsupported:"):
                    raise error_at(node.src, "dtype", f"{node.op} gives dtype {m.dtype[12:]}, "
                                   "which has no plan dtype (f32 f16 bf16 f64 i32 i64 bool)")
            fn = RULES.get(node.op)
            if fn is None:
                raise error_at(node.src, "unsupported-op",
                               f"no lowering for ATen op {node.op} (docs/torch-harness.md lists "
                               "the supported ops)")
            value = self.value if node.op not in SHAPE_ONLY else _drop_refs
            unread = unread_args(node)
            args = [value(a) if i not in unread else _drop_refs(a)
                    for i, a in enumerate(node.args)]
            kwargs = {k: value(v) for k, v in node.kwargs.items()}
            if node.op not in neg_inf.INF_AS_ATTRIBUTE and (
                    neg_inf.holds_inf(args) or neg_inf.holds_inf(list(kwargs.values()))):
                fn = neg_inf.INF_RULES.get(node.op) or _refuse_inf
            result = self._apply(fn, args, kwargs)
            results = result if isinstance(result, (list, tuple)) else [result]
            for i, r in enumerate(results):
                self.env[Ref(node.id, i)] = r
        self.node = None

    def _apply(self, fn, args, kwargs):
        """A rule's result; a rule that fails on arguments it did not expect is a clear
        error at the user's line, never a traceback."""
        try:
            return fn(self, *args, **kwargs)
        except CaptureError:
            raise
        except Exception as e:  # noqa: BLE001 (any failure of a rule)
            raise self.error("lowering", f"{self.node.op} could not be lowered with these "
                             f"arguments ({type(e).__name__}: {e}); please report it") from e


def _refuse_inf(L, *args, **kwargs):
    raise neg_inf.refuse(L)


def _drop_refs(a):
    if isinstance(a, Ref):
        return None
    if isinstance(a, list):
        return [_drop_refs(x) for x in a]
    return a


def _refs(args):
    out = []
    for a in args:
        if isinstance(a, Ref):
            out.append(a)
        elif isinstance(a, list):
            out.extend(_refs(a))
    return out


def shape_of(x):
    return x.shape if isinstance(x, V) else []


def broadcast(*xs):
    shapes = [shape_of(x) for x in xs]
    n = max(len(s) for s in shapes)
    out = []
    for i in range(n):
        dims = [s[len(s) - n + i] for s in shapes if len(s) - n + i >= 0]
        big = [d for d in dims if d != 1]
        out.append(big[0] if big else 1)
    return out


def _common_dtype(a, b):
    ds = [x.dtype for x in (a, b) if isinstance(x, V)]
    if any(dclass(d) == "real" for d in ds) or any(isinstance(x, float) for x in (a, b)):
        return next((d for d in ds if dclass(d) == "real"), "f32")
    if any(dclass(d) == "int" for d in ds):
        return next(d for d in ds if dclass(d) == "int")
    return ds[0] if ds else "f32"


from . import neg_inf  # noqa: E402 (it builds on the classes above)
