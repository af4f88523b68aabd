"""`python3 -m shardproof_torch capture HARNESS.py [--mesh dp=2,tp=4] [-o plan.json]`
`python3 -m shardproof_torch serve --socket PATH` (the capture server, server.py)

Exit codes: 0 captured; 2 invalid harness or a program that cannot be captured (one line
`file:line: [rule] text` on stderr); 4 internal error."""
import argparse
import gc
import json
import os
import sys
import time
import traceback

from .errors import EXIT_INTERNAL, EXIT_INVALID, EXIT_OK, CaptureError

EMITTABLE = {"src", "scale"}


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        sys.stderr.write(f"shardproof capture: [usage] {message}\n")
        sys.exit(EXIT_INVALID)


def parser():
    p = _Parser(prog="python3 -m shardproof_torch",
                description="Capture a PyTorch training step (a harness file) as a shardproof "
                            "plan (docs/torch-harness.md).")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("capture", help="capture a harness into a plan")
    c.add_argument("harness", help="the harness file (.py)")
    c.add_argument("--mesh", default="", help="override mesh sizes, e.g. dp=2,tp=4")
    c.add_argument("-o", "--output", default="-", help="plan file to write (default: stdout)")
    c.add_argument("--emit", default="src,scale",
                   help="comma list of optional plan features: src (source location on every "
                   "op: findings name your lines, and the engine infers intermediate claims), "
                   "scale (scaled lineage claims). Default: both; '' for neither (an engine "
                   "older than both rejects such plans)")
    c.add_argument("--no-grad-claims", action="store_true",
                   help="do not claim each rank's final gradients (fewer, larger stages)")
    c.add_argument("--stats", action="store_true", help="print capture statistics on stderr")
    c.add_argument("--cache-dir", default="",
                   help="keep the plan in DIR and take it from there while the command line, "
                   "working directory, interpreter, environment and every file the capture "
                   "read are unchanged (capture_cache.py); the CLI passes its cache's "
                   "captures/")
    c._parser_class = _Parser
    v = sub.add_parser("serve", help="keep torch imported and fork each capture from this "
                       "process (server.py; `shardproof verify H.py` starts it)")
    v.add_argument("--socket", required=True, help="the Unix socket to listen on")
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    if args.command == "serve":
        from .server import serve
        return serve(args.socket)
    from .driver import Capture
    from .mesh import parse_mesh_override
    cache = None
    try:
        emit = [e for e in args.emit.split(",") if e]
        bad = [e for e in emit if e not in EMITTABLE]
        if bad:
            raise CaptureError("usage", f"--emit: unknown feature(s) {bad} (known: src, scale)")
        cache = None
        if args.cache_dir and args.output != "-":
            from .capture_cache import CaptureCache
            cache = CaptureCache(args.cache_dir, {
                "harness": os.path.abspath(args.harness), "mesh": args.mesh, "emit": emit,
                "grad_claims": not args.no_grad_claims})
            if cache.lookup(args.output):
                if args.stats:
                    sys.stderr.write(json.dumps({"cached": True}) + "\n")
                return EXIT_OK
            cache.watch_dirs([os.path.dirname(os.path.abspath(args.harness)), os.getcwd()])
            cache.recorder.start()
        # No cyclic collection in this process: the capture would otherwise leave its
        # millions of objects to the collector's first pass while the plan is written.
        gc.disable()
        cap = Capture(args.harness, parse_mesh_override(args.mesh), emit,
                      claim_grads=not args.no_grad_claims, as_text=True)
        chunks = cap.run()
        t = time.time()
        if args.output == "-":
            sys.stdout.writelines(chunks)
            sys.stdout.write("\n")
        else:
            tmp = args.output + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                f.writelines(chunks)
                f.write("\n")
            os.replace(tmp, args.output)
        cap.stats["write_s"] = round(time.time() - t, 3)
        if cache is not None:
            cache.store(args.output)
        if args.stats:
            sys.stderr.write(json.dumps(cap.stats) + "\n")
        return EXIT_OK
    except CaptureError as e:
        sys.stderr.write(e.message() + "\n")
        return EXIT_INVALID
    except OSError as e:
        sys.stderr.write(f"shardproof capture: [io] {e}\n")
        return EXIT_INTERNAL
    except Exception:
        sys.stderr.write("shardproof capture: [internal] unexpected error; please report:\n")
        traceback.print_exc()
        return EXIT_INTERNAL
    finally:
        if cache is not None:
            cache.recorder.stop()  # os.environ is the process's own again


if __name__ == "__main__":
    code = main()
    if sys.getprofile() is not None:  # under cProfile: let it write its statistics
        sys.exit(code)
    # A large capture leaves millions of objects: tearing the interpreter down would free
    # them one by one (and collect their cycles) for nothing.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
