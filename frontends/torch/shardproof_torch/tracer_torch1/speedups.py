"""Faster equivalents of two torch 1.13 internals that dominate the cost of tracing a large
program, installed only while a program is traced (`installed()`), and exact: each gives the
result the original gives (tests/test_speedups.py compares them).

- `torch.fx.graph._Namespace.create_name` looks for a free name `base_1`, `base_2`, ... from 1
  on every call: the k-th `add` of a graph costs k steps, a 7,000-node graph about 10^7
  (a quarter of a 32-layer capture). Names are never released, so the first free suffix only
  grows: remembering it per base gives the same name in one step.
- `torch.utils._pytree.tree_flatten` (called about 10^7 times by make_fx and fake tensors)
  classifies every leaf through three helper calls and builds a fresh `LeafSpec` for it. The
  fast version classifies a leaf with one dictionary lookup and shares one `LeafSpec` (specs
  are compared by value and never mutated). Its code replaces the original's in place, so every
  module that imported the function gets it."""
import contextlib

from torch.fx import graph as fx_graph
from torch.utils import _pytree

_original_create_name = fx_graph._Namespace.create_name


def _create_name(self, candidate, obj):
    """_Namespace.create_name of torch 1.13 with the search for a free suffix started where the
    last search for the same base ended (every suffix below it is taken)."""
    if obj is not None and obj in self._obj_to_name:
        return self._obj_to_name[obj]
    candidate = self._illegal_char_regex.sub('_', candidate)
    if candidate[0].isdigit():
        candidate = f'_{candidate}'
    match = self._name_suffix_regex.match(candidate)
    if match is None:
        base, num = candidate, None
    else:
        base, num_str = match.group(1, 2)
        num = int(num_str)
    candidate = base if num is None else f'{base}_{num}'
    num = num if num else 0
    # base -> h: every name base_k with 1 <= k < h is taken (in _used_names)
    hints = self.__dict__.setdefault("_sp_taken_below", {})
    start = None
    if candidate in self._used_names or self._is_illegal_name(candidate, obj):
        num += 1
        if num <= hints.get(base, 1):  # the original's search would pass over taken names
            num = start = hints.get(base, 1)
        candidate = f'{base}_{num}'
        while candidate in self._used_names or self._is_illegal_name(candidate, obj):
            num += 1
            candidate = f'{base}_{num}'
    self._used_names.setdefault(candidate, 0)
    if start is not None:
        h = start
        while f'{base}_{h}' in self._used_names:
            h += 1
        hints[base] = h
    if obj is None:
        self._unassociated_names.add(candidate)
    else:
        self._obj_to_name[obj] = candidate
    return candidate


def _fast_tree_flatten(pytree):
    # Runs with torch.utils._pytree's globals (its code replaces tree_flatten's); the
    # original's semantics: a namedtuple's node type is `namedtuple`, anything whose node type
    # is not registered is a leaf.
    typ = type(pytree)
    if typ is not tuple and isinstance(pytree, tuple) and \
            _is_namedtuple_instance(pytree):  # noqa: F821
        typ = namedtuple  # noqa: F821
    node = SUPPORTED_NODES.get(typ)  # noqa: F821
    if node is None:
        return [pytree], _sp_leaf_spec  # noqa: F821
    children, context = node.flatten_fn(pytree)
    result = []
    specs = []
    for child in children:
        ctype = type(child)
        if ctype in SUPPORTED_NODES or isinstance(child, tuple):  # noqa: F821
            flat, spec = tree_flatten(child)  # noqa: F821
            result += flat
            specs.append(spec)
        else:
            result.append(child)
            specs.append(_sp_leaf_spec)  # noqa: F821
    return result, TreeSpec(typ, context, specs)  # noqa: F821


_original_flatten_code = _pytree.tree_flatten.__code__


@contextlib.contextmanager
def installed():
    """The fast versions in place for the duration (nesting is fine)."""
    if fx_graph._Namespace.create_name is _create_name:
        yield
        return
    fx_graph._Namespace.create_name = _create_name
    _pytree._sp_leaf_spec = _pytree.LeafSpec()
    _pytree.tree_flatten.__code__ = _fast_tree_flatten.__code__
    try:
        yield
    finally:
        _pytree.tree_flatten.__code__ = _original_flatten_code
        fx_graph._Namespace.create_name = _original_create_name
