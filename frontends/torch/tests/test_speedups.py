"""The fast torch internals of tracer_torch1/speedups.py give what the originals give."""
import collections
import random

import pytest

torch = pytest.importorskip("torch")
from torch.fx import graph as fx_graph  # noqa: E402
from torch.fx.immutable_collections import immutable_dict, immutable_list  # noqa: E402
from torch.utils import _pytree  # noqa: E402

from shardproof_torch.tracer_torch1 import speedups  # noqa: E402

Point = collections.namedtuple("Point", ["x", "y"])


class NotANamedTuple(tuple):
    pass


def trees():
    t = torch.zeros(2)
    return [
        1, None, t, "s", torch.Size([2, 3]), (), [], {}, (1,), [t, (t, 2)],
        {"a": [1, {"b": (t, None)}], "c": Point(1, [2, 3])},
        collections.OrderedDict([("z", 1), ("a", (2, 3))]),
        NotANamedTuple((1, 2)), [NotANamedTuple((t,)), torch.Size([1])],
        immutable_list([1, immutable_dict({"k": t})]), Point(Point(1, 2), ()),
        [[[[]]], ((),), {"x": {}}],
    ]


def specs_equal(a, b):
    return type(a) is type(b) and a == b and repr(a) == repr(b)


def test_tree_flatten_is_the_original():
    cases = trees()
    original = [_pytree.tree_flatten(t) for t in cases]
    original_trip = [_pytree.tree_unflatten(*_pytree.tree_flatten(t)) for t in cases]
    with speedups.installed():
        assert _pytree.tree_flatten.__code__ is not speedups._original_flatten_code
        fast = [_pytree.tree_flatten(t) for t in cases]
        round_trip = [_pytree.tree_unflatten(*_pytree.tree_flatten(t)) for t in cases]
    assert _pytree.tree_flatten.__code__ is speedups._original_flatten_code
    for (leaves, spec), (fleaves, fspec), tree in zip(original, fast, cases):
        assert len(leaves) == len(fleaves) and all(a is b for a, b in zip(leaves, fleaves)), tree
        assert specs_equal(spec, fspec), tree
    for back, expected in zip(round_trip, original_trip):
        assert type(back) is type(expected) and repr(back) == repr(expected)


def names(create, requests):
    ns = fx_graph._Namespace()
    objs = [object() for _ in requests]
    return [create(ns, cand, obj if keep else None) for (cand, keep), obj in
            zip(requests, objs)]


def test_create_name_is_the_original():
    rng = random.Random(7)
    bases = ["add", "add_1", "add_3", "mul", "x_0", "1x", "sum", "list", "max", "add_"]
    requests = [(rng.choice(bases), rng.random() < 0.5) for _ in range(3000)]
    slow = names(speedups._original_create_name, requests)
    fast = names(speedups._create_name, requests)
    assert fast == slow
    assert len(set(fast)) == len(fast)


def test_installed_restores_create_name():
    with speedups.installed():
        assert fx_graph._Namespace.create_name is speedups._create_name
        with speedups.installed():
            pass
        assert fx_graph._Namespace.create_name is speedups._create_name
    assert fx_graph._Namespace.create_name is speedups._original_create_name
