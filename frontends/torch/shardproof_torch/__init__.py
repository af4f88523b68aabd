"""shardproof front end for PyTorch: capture a harness's training step, single-device
and per rank, and write it out as a shardproof plan (docs/torch-harness.md).

Layout: `harness`, `mesh`, `context` read the user's harness; `tracer_torch1` is the only
torch-version-specific part and produces neutral traces (`trace`); `lowering` turns traces
into plan ops; `plan_writer` assembles the plan."""
