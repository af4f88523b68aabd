"""The neutral per-rank trace: what a tracer produces and the lowering reads. Plain data,
no torch objects, so a second tracer (torch 2.x) only has to produce the same thing.

A value reference is `Ref(node, index)`: output `index` of node `node` (inputs are nodes
too, of op "input"). Op names are ATen overload names as `aten.addmm.default`, or
`shardproof.<op>.default` for the front end's own ops (collectives, optimizer steps,
gradient marks). Arguments are JSON-like: numbers, strings, bools, None, lists, Refs, and
dtypes written as "dtype:f32"."""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass(frozen=True)
class Ref:
    node: int
    index: int = 0


@dataclass
class TensorMeta:
    shape: List[int]
    dtype: str  # plan dtype name: f32 f16 bf16 f64 i32 i64 bool
    # row-major in memory from offset 0 (as_strided reads memory order); None: unknown
    contiguous: Optional[bool] = None


@dataclass
class Node:
    id: int
    op: str
    args: List[Any]
    kwargs: Dict[str, Any]
    outs: List[Optional[TensorMeta]]  # None for a non-tensor output
    src: Optional[Dict[str, Any]] = None


@dataclass
class Input:
    node: int
    kind: str  # "param", "buffer", "batch"
    name: str  # parameter/buffer name, or batch key


@dataclass
class Trace:
    """One program: the logical step, or one rank's step."""
    nodes: List[Node] = field(default_factory=list)
    inputs: List[Input] = field(default_factory=list)
    # parameter name -> its value after the step
    updated: Dict[str, Ref] = field(default_factory=dict)
    # gradient marks: parameter name -> the gradient the optimizer reads (default step only)
    grads: Dict[str, Ref] = field(default_factory=dict)
    # group id -> {"axes": [...]} (a mesh line relative to the rank) or {"ranks": [...]}
    groups: List[Dict[str, Any]] = field(default_factory=list)
    # rank-specific facts the program read: the coordinates of these axes
    read_axes: List[str] = field(default_factory=list)
    # what the traced function returned (trace_function only)
    results: List[Ref] = field(default_factory=list)

    def node(self, ref: Ref) -> Node:
        return self.nodes[ref.node]

    def meta(self, ref: Ref) -> TensorMeta:
        return self.nodes[ref.node].outs[ref.index]
