"""Version-independent lowering: a neutral Trace -> plan ops (docs/torch-harness.md,
"Lowering"). One rule per ATen op, in the rules_*.py files; `core` holds the machinery."""
from . import (rules_shape, rules_elementwise, rules_activations, rules_reduce, rules_nn,  # noqa: F401
               rules_index, rules_shardproof, rules_fused)
from .core import Lowerer, RULES  # noqa: F401
from .neg_inf import register_shape_ops

register_shape_ops()  # after every finite rule exists: -inf pairs reuse them
