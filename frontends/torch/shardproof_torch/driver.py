"""Capture of a whole harness: the logical program, then one trace per distinct rank
program, then the plan. Ranks whose programs read the same coordinates (ctx.coords,
ctx.rank, get_rank, ...) share a trace: the program is a function of what it read, and the
groups it names are re-targeted per rank (docs/torch-harness.md). Independent traces run on
two processes (forked.py)."""
import gc
import json
import sys
import time

from . import harness as harness_mod
from . import lineage
from .context import RankContext
from .rank_environ import rank_environment
from .errors import CaptureError
from .mesh import mesh_from
from .plan_writer import BATCH, BUFFER, PARAM, RankProgram, write_plan, write_plan_text
from .traced import Logical, Traced, shapes_of
from . import forked


def _tracer():
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise CaptureError("torch-missing", f"PyTorch cannot be imported by {sys.executable} "
                           f"({e}); install python3-torch (scripts/setup.sh) or set "
                           "SHARDPROOF_PYTHON to an interpreter that has it")
    import torch
    if not torch.__version__.startswith("1."):
        # One tracer per torch line (docs/torch-harness.md): 1.x's make_fx and
        # functionalize differ from 2.x's; a traceback from deep inside either
        # would say less.
        raise CaptureError("torch-version", f"{sys.executable} has torch {torch.__version__}; "
                           "this front end has a tracer for torch 1.13 only (Debian 12's "
                           "python3-torch): set SHARDPROOF_PYTHON to an interpreter with it")
    from .tracer_torch1 import capture as tracer
    return tracer


def default_step_sources(h):
    def at(name):
        return {"file": h.file, "line": h.line_of(name), "function": name}
    return {"loss": at("loss"), "finalize_grads": at("finalize_grads"),
            "optimizer": at("optimizer")}


class Capture:
    def __init__(self, path, mesh_override=None, emit=(), claim_grads=True, share_lowering=True,
                 as_text=False):
        """as_text: run() gives the plan as JSON text in pieces (plan_text.py: the text of
        the dictionary it gives otherwise, without building it), not as a dictionary."""
        self.path = path
        self.share_lowering = share_lowering
        self.as_text = as_text
        self.mesh_override = mesh_override or {}
        self.emit = set(emit)
        self.claim_grads = claim_grads
        self.stats = {}

    def run(self):
        h = harness_mod.load(self.path)  # first: a harness that imports torch names its line
        # Tracing and lowering build millions of objects and free few: the cyclic collector's
        # full passes over them cost a quarter of a large capture and find little.
        collecting = gc.isenabled()
        gc.disable()
        try:
            plan = self._run(h)
        finally:
            if collecting:
                gc.enable()
            harness_mod.unload(h)
        if not self.as_text:
            # the traces' and models' cycles, before the caller builds the plan's text (the
            # text writer needs little memory: its caller exits without the collection)
            gc.collect()
        return plan

    def _run(self, h):
        t0 = time.time()
        tracer = _tracer()
        mesh = mesh_from(h.MESH, self.mesh_override, lambda a: harness_mod.names_axis(h, a),
                         (h.file, h.line_of("MESH")))
        fake = tracer.fake_mode()
        try:
            with fake:
                batch = h.batch()
        except CaptureError:
            raise
        except Exception as e:
            raise tracer.translate_error(e, h.file)
        harness_mod.check_batch(h, batch, mesh)
        sources = default_step_sources(h)
        parallel = forked.jobs() > 1
        with forked.single_threaded(parallel):
            return self._capture(h, tracer, mesh, fake, batch, sources, parallel, t0)

    def _capture(self, h, tracer, mesh, fake, batch, sources, parallel, t0):
        import torch

        def trace_logical():
            # the logical program: one rank, every axis of size 1
            lctx = RankContext(mesh.logical(), 0, [])
            with fake:
                lbatch = {k: torch.empty(v.shape, dtype=v.dtype) for k, v in batch.items()}
            with rank_environment(lctx):  # module-level reads of RANK at import too
                fresh = harness_mod.fresh(h)
            ltrace, lmodel = tracer.capture_program(fresh, lctx, True, fake, lbatch, sources)
            return Logical(ltrace, shapes_of(lmodel.named_parameters()),
                           shapes_of(lmodel.named_buffers()))

        def trace_rank(rep, ranks, logical):
            """rep's program traced; the blocks of `ranks` (predicted to share it) computed
            while its model is at hand."""
            coords = mesh.coords(rep)
            ctx = RankContext(mesh, rep, [])
            with fake:
                chunk = {}
                for k, v in batch.items():
                    box = harness_mod.batch_slice(h, k, list(v.shape), mesh, coords)
                    chunk[k] = torch.empty([hi - lo for lo, hi in box], dtype=v.dtype)
            with rank_environment(ctx):
                own = harness_mod.fresh(h)  # the program's own module state
            trace, model = tracer.capture_program(own, ctx, False, fake, chunk, sources)
            traced = Traced(trace, coords, model, own)
            if logical is not None:
                for r in ranks:
                    traced.blocks[r] = forked.attempt(
                        lambda r=r: self._blocks(own, mesh, r, model, batch, logical))
            return traced

        # The logical program and rank 0's, side by side; rank 0's trace tells which
        # coordinates its program reads, so which other programs there are (one per
        # combination of those coordinates) and they are traced side by side too.
        done = forked.run_tasks([("logical", trace_logical),
                                 ("rank", lambda: trace_rank(0, [], None))], parallel)
        logical = forked.value(done["logical"])
        first = forked.value(done["rank"])
        self.stats["logical_nodes"] = len(logical.trace.nodes)
        entries = [first]
        predicted = {}  # representative rank -> ranks predicted to share its program
        for r in range(1, mesh.world):
            key = first.key(mesh.coords(r))
            if key == first.key(first.coords) and self._members_ok(first.trace, r, mesh):
                continue
            rep = next((q for q in predicted if first.key(mesh.coords(q)) == key), r)
            predicted.setdefault(rep, []).append(r)
        done = forked.run_tasks([(rep, lambda rep=rep, ranks=ranks: trace_rank(
            rep, ranks, logical)) for rep, ranks in predicted.items()], parallel)
        failed = {}  # rank -> its program's capture error, raised when the rank's turn comes
        for rep in predicted:
            try:
                entries.append(forked.value(done[rep]))
            except CaptureError as e:
                failed[rep] = e

        programs = []
        seen_params = set()
        for r in range(mesh.world):
            if r in failed:
                raise failed[r]
            coords = mesh.coords(r)
            hit = next((e for e in entries if e.serves(coords) and
                        self._members_ok(e.trace, r, mesh) and e.can_place(r)), None)
            if hit is None:  # a program the prediction missed: traced here
                hit = trace_rank(r, [], logical)
                entries.append(hit)
            blocks = hit.blocks.get(r)
            blocks = forked.value(blocks) if blocks is not None else \
                self._blocks(hit.harness, mesh, r, hit.model, batch, logical)
            trace = hit.trace
            group_ranks = [g["ranks"] if "ranks" in g else mesh.group_ranks(r, g["axes"])
                           for g in trace.groups]
            seen_params |= lineage.check_names(h, logical.params, hit.param_names, r)
            programs.append(RankProgram(r, trace, group_ranks, blocks))
        for name in logical.params:
            if name not in seen_params:
                raise CaptureError("param-name", f"logical parameter {name!r} is held by no rank "
                                   "(parameters pair by named_parameters() name)", h.file,
                                   h.line_of("build_logical"))
        self.stats["distinct_rank_programs"] = len(entries)
        self.stats["rank_nodes"] = sum(len(e.trace.nodes) for e in entries)
        self.stats["capture_s"] = round(time.time() - t0, 3)
        t1 = time.time()
        meta = {"captured_by": "shardproof_torch", "harness": h.file,
                "mesh": dict(mesh.axes), "distinct_rank_programs": len(entries)}
        name = f"{h.file} " + " ".join(f"{a}{n}" for a, n in mesh.axes)
        plan = None
        if self.as_text and self.share_lowering:
            plan = write_plan_text(name, meta, logical.trace, programs, mesh.world, self.emit,
                                   self.claim_grads)
        if plan is None:
            plan = write_plan(name, meta, logical.trace, programs, mesh.world, self.emit,
                              self.claim_grads, self.share_lowering)
            if self.as_text:
                plan = iter([json.dumps(plan, separators=(",", ":"))])
        self.stats["lower_s"] = round(time.time() - t1, 3)
        return plan

    @staticmethod
    def _members_ok(trace, r, mesh):
        return all(r in g["ranks"] for g in trace.groups if "ranks" in g)

    def _blocks(self, h, mesh, r, model, batch, logical):
        ctx = RankContext(mesh, r, [])  # a fresh ctx: layouts may read anything
        coords = mesh.coords(r)
        out = {}
        for kind, items, shapes in ((PARAM, model.named_parameters(), logical.params),
                                    (BUFFER, model.named_buffers(), logical.buffers)):
            for name, t in items:
                if name not in shapes:
                    if kind == BUFFER:
                        raise CaptureError("param-name", f"rank {r} has buffer {name!r}, which "
                                           "the logical model does not have", h.file,
                                           h.line_of("build_rank"))
                    continue  # reported by check_names
                layout = lineage.layout_of(h, name, t, ctx, kind)
                out[(kind, name)] = lineage.blocks(h, name, layout, list(t.shape),
                                                   shapes[name], mesh, coords)
        for k, v in batch.items():
            box = harness_mod.batch_slice(h, k, list(v.shape), mesh, coords)
            out[(BATCH, k)] = [(0, 0, box[0][1] - box[0][0] if box else 0, box)]
        return out
