"""Version-independent lowering: a neutral Trace -> plan ops (docs/torch-harness.md,
"Lowering"). One rule per ATen op, in the rules_*.py files; `core` holds the machinery."""
from . import rules_shape, rules_elementwise, rules_reduce, rules_nn, rules_index, rules_shardproof, rules_fused  # noqa: F401,E501
from .core import Lowerer, RULES  # noqa: F401
