"""Capture of a whole harness: the logical program, then one trace per distinct rank
program, then the plan. Ranks whose programs read the same coordinates (ctx.coords,
ctx.rank, get_rank, ...) share a trace: the program is a function of what it read, and the
groups it names are re-targeted per rank (docs/torch-harness.md)."""
import time

from . import harness as harness_mod
from . import lineage
from .context import RankContext
from .errors import CaptureError
from .mesh import mesh_from
from .plan_writer import BATCH, BUFFER, PARAM, RankProgram, write_plan


def _tracer():
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise CaptureError("torch-missing", f"PyTorch cannot be imported ({e}); capture needs "
                           "torch (set SHARDPROOF_PYTHON to an interpreter that has it)")
    from .tracer_torch1 import capture as tracer
    return tracer


def default_step_sources(h):
    def at(name):
        return {"file": h.file, "line": h.line_of(name), "function": name}
    return {"loss": at("loss"), "finalize_grads": at("finalize_grads"),
            "optimizer": at("optimizer")}


class Capture:
    def __init__(self, path, mesh_override=None, emit=(), claim_grads=True, share_lowering=True):
        self.path = path
        self.share_lowering = share_lowering
        self.mesh_override = mesh_override or {}
        self.emit = set(emit)
        self.claim_grads = claim_grads
        self.stats = {}

    def run(self):
        h = harness_mod.load(self.path)  # first: a harness that imports torch names its line
        try:
            return self._run(h)
        finally:
            harness_mod.unload(h)

    def _run(self, h):
        t0 = time.time()
        tracer = _tracer()
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode
        mesh = mesh_from(h.MESH, self.mesh_override)
        fake = FakeTensorMode(allow_fallback_kernels=False)
        try:
            with fake:
                batch = h.batch()
        except CaptureError:
            raise
        except Exception as e:
            raise tracer.translate_error(e, h.file)
        harness_mod.check_batch(h, batch, mesh)
        sources = default_step_sources(h)

        # the logical program: one rank, every axis of size 1
        lmesh = mesh.logical()
        lctx = RankContext(lmesh, 0, [])
        with fake:
            lbatch = {k: torch.empty(v.shape, dtype=v.dtype) for k, v in batch.items()}
        ltrace, lmodel = tracer.capture_program(h, lctx, True, fake, lbatch, sources)
        logical_params = dict(lmodel.named_parameters())
        logical_buffers = dict(lmodel.named_buffers())
        self.stats["logical_nodes"] = len(ltrace.nodes)

        # the rank programs
        traces = []  # (trace, model, coords of the traced rank, ctx)
        programs = []
        seen_params = set()
        for r in range(mesh.world):
            coords = mesh.coords(r)
            hit = None
            for entry in traces:
                trace, model, tcoords, _ = entry
                if all(coords[a] == tcoords[a] for a in trace.read_axes) and \
                        self._members_ok(trace, r, mesh):
                    hit = entry
                    break
            if hit is None:
                ctx = RankContext(mesh, r, [])
                with fake:
                    chunk = {}
                    for k, v in batch.items():
                        box = harness_mod.batch_slice(h, k, list(v.shape), mesh, coords)
                        chunk[k] = torch.empty([hi - lo for lo, hi in box], dtype=v.dtype)
                trace, model = tracer.capture_program(h, ctx, False, fake, chunk, sources)
                hit = (trace, model, coords, ctx)
                traces.append(hit)
            trace, model, _, _ = hit
            group_ranks = [g["ranks"] if "ranks" in g else mesh.group_ranks(r, g["axes"])
                           for g in trace.groups]
            blocks = self._blocks(h, mesh, r, model, batch, logical_params, logical_buffers)
            seen_params |= lineage.check_names(h, logical_params, dict(model.named_parameters()),
                                               r)
            programs.append(RankProgram(r, trace, group_ranks, blocks))
        for name in logical_params:
            if name not in seen_params:
                raise CaptureError("param-name", f"logical parameter {name!r} is held by no rank "
                                   "(parameters pair by named_parameters() name)", h.file,
                                   h.line_of("build_logical"))
        self.stats["distinct_rank_programs"] = len(traces)
        self.stats["rank_nodes"] = sum(len(t[0].nodes) for t in traces)
        self.stats["capture_s"] = round(time.time() - t0, 3)
        t1 = time.time()
        meta = {"captured_by": "shardproof_torch", "harness": h.file,
                "mesh": dict(mesh.axes), "distinct_rank_programs": len(traces)}
        name = f"{h.file} " + " ".join(f"{a}{n}" for a, n in mesh.axes)
        plan = write_plan(name, meta, ltrace, programs, mesh.world, self.emit, self.claim_grads,
                          self.share_lowering)
        self.stats["lower_s"] = round(time.time() - t1, 3)
        return plan

    @staticmethod
    def _members_ok(trace, r, mesh):
        return all(r in g["ranks"] for g in trace.groups if "ranks" in g)

    def _blocks(self, h, mesh, r, model, batch, logical_params, logical_buffers):
        ctx = RankContext(mesh, r, [])  # a fresh ctx: layouts may read anything
        coords = mesh.coords(r)
        out = {}
        for kind, items, logical in ((PARAM, model.named_parameters(), logical_params),
                                     (BUFFER, model.named_buffers(), logical_buffers)):
            for name, t in items:
                if name not in logical:
                    if kind == BUFFER:
                        raise CaptureError("param-name", f"rank {r} has buffer {name!r}, which "
                                           "the logical model does not have", h.file,
                                           h.line_of("build_rank"))
                    continue  # reported by check_names
                layout = lineage.layout_of(h, name, t, ctx, kind)
                out[(kind, name)] = lineage.blocks(h, name, layout, list(t.shape),
                                                   list(logical[name].shape), mesh, coords)
        for k, v in batch.items():
            box = harness_mod.batch_slice(h, k, list(v.shape), mesh, coords)
            out[(BATCH, k)] = [(0, 0, box[0][1] - box[0][0] if box else 0, box)]
        return out
