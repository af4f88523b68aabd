"""The plan written as text (plan_text.py: rank templates encoded once, sentinels replaced per
rank) is byte for byte the JSON of the plan built as dictionaries, on programs whose ranks
differ in their blocks, groups, peers and scaled claims; and a template whose strings hold a
sentinel character is written from dictionaries instead."""
import json
import os

import pytest

from conftest import REPO, needs_torch

pytestmark = needs_torch
HERE = os.path.dirname(os.path.abspath(__file__))

CASES = [
    (os.path.join(REPO, "examples", "torch", "gpt", "harness.py"), {"dp": 4, "tp": 2}),
    (os.path.join(REPO, "examples", "torch", "mlp", "harness.py"), {"dp": 2, "tp": 2}),
    (os.path.join(HERE, "programs", "zero_tp", "harness.py"), {"dp": 2, "tp": 2}),
    (os.path.join(HERE, "programs", "pipeline", "harness.py"), None),
]


def capture(path, mesh, as_text, emit=("src", "scale")):
    from shardproof_torch.driver import Capture
    return Capture(path, mesh, emit, as_text=as_text).run()


@pytest.mark.parametrize("path,mesh", CASES, ids=lambda c: os.path.basename(
    os.path.dirname(c)) if isinstance(c, str) else str(c))
def test_text_is_the_plans_json(path, mesh):
    text = "".join(capture(path, mesh, True))
    plan = capture(path, mesh, False)
    assert text == json.dumps(plan, separators=(",", ":"))


def test_a_sentinel_in_a_string_writes_from_dictionaries(monkeypatch):
    from shardproof_torch import plan_text
    path, mesh = CASES[1]
    seen = []
    original = plan_text.TemplateText.__init__

    def poisoned(self, template, scale):
        op = next(o for o in template.b.ops if "src" in o)
        op["src"] = dict(op["src"], function="f\x00")  # a string that holds the sentinel
        try:
            original(self, template, scale)
        except plan_text.Unshareable:
            seen.append(template.prefix)
            raise

    monkeypatch.setattr(plan_text.TemplateText, "__init__", poisoned)
    chunks = list(capture(path, mesh, True))
    assert seen, "the poisoned template was refused"
    assert len(chunks) == 1  # written from the dictionaries (lowered again, unpoisoned)
    monkeypatch.undo()
    assert chunks[0] == json.dumps(capture(path, mesh, False), separators=(",", ":"))
