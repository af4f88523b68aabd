"""The tracer for torch 1.13 (make_fx over fake tensors, then functionalize). The only
module that knows torch internals; it produces `trace.Trace`."""
