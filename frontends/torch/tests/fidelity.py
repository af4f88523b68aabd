"""Fidelity check of lowering rules: a torch function is traced, lowered into a plan, the
plan's logical graph is run by the engine's own interpreter (`shardproof eval
--real-functions`), and the result is compared with torch's eager float64 result."""
import json
import os
import subprocess
import tempfile

from shardproof_torch.lowering import Lowerer
from shardproof_torch.lowering.core import GraphBuilder


def plan_of_trace(trace):
    """A plan whose logical graph computes trace.results; the parallel graph is the same
    program on one rank, so the plan validates."""
    graphs = []
    for parallel in (False, True):
        b = GraphBuilder(parallel=parallel, emit_src=False)
        L = Lowerer(trace, b, "r0/" if parallel else "", 0 if parallel else None)
        for inp in trace.inputs:
            meta = trace.nodes[inp.node].outs[0]
            name = f"r0/{inp.name}" if parallel else inp.name
            v = b.declare(name, meta.shape, meta.dtype, rank=0 if parallel else None,
                          of={"tensor": inp.name} if parallel else None)
            b.inputs.append(v.name)
            L.bind_input(inp.node, v)
        L.run(trace.results)
        for i, ref in enumerate(trace.results):
            v = L.result(ref)
            name = f"r0/out{i}" if parallel else f"out{i}"
            if v.name in b.inputs:
                v = L.emit("scale", [v], v.shape, v.dtype, {"factor": 1})
            b.rename(v.name, name)
            if parallel:
                b.tensors[name]["of"] = {"tensor": f"out{i}"}
            b.outputs.append(name)
        graphs.append(b.graph(1 if parallel else None))
    return {"format": "shardproof-plan/1", "name": "fidelity", "logical": graphs[0],
            "parallel": graphs[1]}


def run_eval(binary, plan, inputs, real_functions=True):
    """{output name: nested list} from the engine's interpreter."""
    with tempfile.TemporaryDirectory() as d:
        plan_path = os.path.join(d, "plan.json")
        values_path = os.path.join(d, "values.json")
        with open(plan_path, "w") as f:
            json.dump(plan, f)
        with open(values_path, "w") as f:
            json.dump(inputs, f)
        cmd = [binary, "eval", plan_path, "--graph", "logical", "--inputs", values_path]
        if real_functions:
            cmd.append("--real-functions")
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise AssertionError(f"shardproof eval failed ({p.returncode}): {p.stderr}\n"
                                 f"plan: {json.dumps(plan)[:3000]}")
        return json.loads(p.stdout)["outputs"]
