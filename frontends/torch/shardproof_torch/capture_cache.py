"""Captures kept for the next identical capture (`capture --cache-dir DIR`; the CLI passes its
cache directory's `captures/`). A capture is a deterministic function of its inputs (the
contract of docs/torch-harness.md): the command line, the working directory, the interpreter,
the environment variables it read, and every file it read. While capturing, an audit hook
records each file the process (and its forked child) opens and each directory it lists
(import resolution), and `os.environ` records each variable read (by name, with its value or
its absence; a read of the whole environment, such as `dict(os.environ)`, records all of
it); every module in sys.modules and every file mapped into the process (torch's shared
libraries) is added at the end. The entry holds the plan and that record. A later capture
with the same command line, directory and interpreter takes the plan only if every recorded
variable has its recorded value, every recorded file is unchanged (its content for files up
to 1 MiB, else its size, modification and change times and inode: a write always moves the
change time) and every recorded directory lists the same names. Anything else, including an error reading the
entry, is a miss: the program is captured again and the entry replaced.

This module imports nothing of torch: a hit costs the interpreter's start and the checks."""
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import MutableMapping

FORMAT = 2  # 2: the environment by the variables read
SMALL = 1 << 20       # files up to this size are compared by content
MAX_PLAN = 256 << 20  # larger plans are not kept
KEPT_VARIANTS = 8     # entries per key (other values of the variables read)


def entry_key(argv_key):
    """The key of a capture: what it was asked, where and by which interpreter (the
    environment variables it reads are checked like the files it reads: a `cd`, which
    changes OLDPWD, or a CI run's own id no longer makes every capture a miss)."""
    h = hashlib.sha256()
    h.update(json.dumps({"format": FORMAT, "args": argv_key, "cwd": os.getcwd(),
                         "python": [sys.executable, sys.version]}).encode())
    return h.hexdigest()


class EnvironReads(MutableMapping):
    """os.environ while a capture runs: each read is recorded in the recorder's `env` (name
    -> value, or None when unset); anything that reads the whole environment sets its
    `env_all`."""

    def __init__(self, real, recorder):
        self._real = real
        self._rec = recorder

    def _note(self, key):
        value = self._real.get(key)
        self._rec.env.setdefault(key, value)
        return value

    def __getitem__(self, key):
        if self._note(key) is None:
            raise KeyError(key)
        return self._real[key]

    def __contains__(self, key):
        return self._note(key) is not None

    def __iter__(self):
        self._rec.env_all = True
        return iter(self._real)

    def __len__(self):
        self._rec.env_all = True
        return len(self._real)

    def __setitem__(self, key, value):
        self._real[key] = value

    def __delitem__(self, key):
        del self._real[key]

    def copy(self):
        self._rec.env_all = True
        return self._real.copy()

    def __getattr__(self, name):  # os._Environ's own (encodekey, _data, ...)
        self._rec.env_all = True
        return getattr(self._real, name)


def _digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _file_state(path):
    """What must be unchanged of a file, or None when it is not a regular file."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {"missing": True}  # looked for and not there: it must still not be there
    except OSError:
        return None
    if not os.path.isfile(path):
        return None
    if st.st_size <= SMALL:
        return {"sha256": _digest(path), "changed": st.st_ctime_ns}
    return {"stat": [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]}


def _same(state, now):
    """Whether a file is as kept: by content when it was small (the change time is only
    written down to tell a file changed while it was being captured)."""
    if now is None or "sha256" not in state:
        return state == now
    return now.get("sha256") == state["sha256"]


OWN_TEMP = "shardproof-capture-"  # the CLI's capture directories, forked.py's pickles


def _names(path):
    """A directory's names, but for the temporary files of captures (a capture of the same
    program, running beside this one or before it, made them: nothing reads them)."""
    try:
        return frozenset(n for n in os.listdir(path) if not n.startswith(OWN_TEMP))
    except OSError:
        return None


def _listing_hash(names):
    return None if names is None else \
        hashlib.sha256("\0".join(sorted(names)).encode()).hexdigest()


def _listing(path):
    return _listing_hash(_names(path))


def _listing_at_end(path, seen, own):
    """The hash a directory's listing is kept under: as the capture saw it, or as it is now
    when all it gained since is what the capture itself wrote (`own`: its output, bytecode
    caches), which changes no import and no read; so the next capture finds it as kept."""
    if seen is None:
        return None
    now = _names(path)
    if now is not None and seen <= now and all(n == "__pycache__" or n in own
                                               for n in now - seen):
        return _listing_hash(now)
    return _listing_hash(seen)


class Recorder:
    """The files opened and directories listed by this process since start() (and those
    a forked child handed over with merge())."""

    active = None

    def __init__(self):
        self.started_ns = time.time_ns()  # reset by start()
        self.files = set()
        self.dirs = {}  # path -> its names when first listed
        self.env = {}  # variable -> its value when first read (None: unset)
        self.env_all = False  # the whole environment was read
        self._real_environ = None
        self._inside = False

    def start(self):
        self.started_ns = time.time_ns()
        Recorder.active = self
        if not getattr(Recorder, "_hooked", False):
            sys.addaudithook(_hook)  # cannot be removed: it does nothing when inactive
            Recorder._hooked = True
        if self._real_environ is None:
            self._real_environ = os.environ
            os.environ = EnvironReads(self._real_environ, self)

    def stop(self):
        Recorder.active = None
        if self._real_environ is not None:
            os.environ = self._real_environ
            self._real_environ = None

    def event(self, name, args):
        if self._inside:
            return
        self._inside = True
        try:
            if name == "open" and args and isinstance(args[0], (str, bytes)):
                path = os.fsdecode(args[0])
                self.files.add(os.path.abspath(path))
            elif name in ("os.listdir", "os.scandir") and args:
                path = os.path.abspath(os.fsdecode(args[0] if args[0] is not None else "."))
                if path not in self.dirs:
                    self.dirs[path] = _names(path)
        finally:
            self._inside = False

    def snapshot(self):
        """What this process read, for the parent: its opened files, and its modules and
        mapped files (a forked child may load an extension module the parent never did)."""
        files = self.files | _module_files() | _mapped_files()
        return {"files": sorted(files), "dirs": dict(self.dirs), "env": dict(self.env),
                "env_all": self.env_all}

    def merge(self, snap):
        self.files.update(snap["files"])
        for d, listing in snap["dirs"].items():
            self.dirs.setdefault(d, listing)
        for k, v in snap.get("env", {}).items():
            self.env.setdefault(k, v)
        self.env_all = self.env_all or snap.get("env_all", False)


def _hook(name, args):
    r = Recorder.active
    if r is not None and (name == "open" or name in ("os.listdir", "os.scandir")):
        r.event(name, args)


def _mapped_files():
    out = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    out.add(parts[5].rstrip("\n"))
    except OSError:
        pass
    return out


def _module_files():
    out = set()
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if isinstance(f, str):
            out.add(os.path.abspath(f))
    return out


class CaptureCache:
    def __init__(self, directory, argv_key):
        self.dir = directory
        self.key = entry_key(argv_key)
        self.recorder = Recorder()

    def _manifest_path(self):
        return os.path.join(self.dir, self.key[:2], self.key + ".json")

    def watch_dirs(self, paths):
        """Directories whose listings the entry also holds (the harness's, the working
        directory: a program may test whether a file exists there without opening it)."""
        for p in paths:
            p = os.path.abspath(p)
            self.recorder.dirs.setdefault(p, _names(p))

    @staticmethod
    def _holds(entry):
        """Whether an entry's record still holds: every variable and file it read as read."""
        env = entry["env"]
        if env.get("all") is not None:
            if sorted(map(list, os.environ.items())) != env["all"]:
                return False
        elif any(os.environ.get(k) != v for k, v in env["read"].items()):
            return False
        for path, state in entry["files"].items():
            if not _same(state, _file_state(path)):
                return False
        return all(_listing(path) == listing for path, listing in entry["dirs"].items())

    def _entries(self):
        with open(self._manifest_path(), encoding="utf-8") as f:
            manifest = json.load(f)
        if manifest.get("format") != FORMAT or manifest.get("key") != self.key:
            return []
        return manifest["entries"]

    def lookup(self, output):
        """Copies the kept plan to `output` (a path, or "-" for stdout); True on a hit. The
        key keeps up to KEPT_VARIANTS entries (the same harness captured with other values
        of the variables it reads: GPT_SIZE=small and medium), newest first."""
        try:
            for entry in self._entries():
                if not self._holds(entry):
                    continue
                # each entry's plan has a name of its own: a manifest never names another's
                plan_path = os.path.join(os.path.dirname(self._manifest_path()),
                                         os.path.basename(entry["plan"]))
                if output == "-":
                    with open(plan_path, "rb") as f:
                        sys.stdout.flush()
                        for block in iter(lambda: f.read(1 << 20), b""):
                            sys.stdout.buffer.write(block)
                        sys.stdout.buffer.flush()
                else:
                    tmp = output + ".tmp"
                    with open(plan_path, "rb") as src, open(tmp, "wb") as dst:
                        for block in iter(lambda: src.read(1 << 20), b""):
                            dst.write(block)
                    os.replace(tmp, output)
                return True
            return False
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return False

    def store(self, plan_file, exclude=()):
        """Keeps the plan just written to `plan_file` with the record of what the capture
        read. Never fails the capture: an entry that cannot be written is not kept."""
        self.recorder.stop()
        try:
            if os.path.getsize(plan_file) > MAX_PLAN:
                return
            skip = {os.path.abspath(p) for p in exclude} | {os.path.abspath(plan_file)}
            cache_dir = os.path.abspath(self.dir) + os.sep
            files = self.recorder.files | _module_files() | _mapped_files()
            states = {}
            for path in sorted(files):
                if path in skip or path.startswith(cache_dir) or path.startswith("/proc/") or \
                        path.startswith("/dev/") or path.startswith(tempfile.gettempdir() +
                                                                    os.sep + "shardproof-"):
                    continue
                state = _file_state(path)
                if state is None:
                    continue
                # A file written while the capture ran may have been read before or after the
                # write: the plan may not be the file's as kept. (Bytecode caches are written
                # from the sources they are checked with.) Timestamps lag the clock by a tick.
                changed = state.get("changed", state.get("stat", [0, 0, 0])[2])
                if changed >= self.recorder.started_ns - 20_000_000 and \
                        os.sep + "__pycache__" + os.sep not in path:
                    return
                states[path] = state
            manifest_path = self._manifest_path()
            folder = os.path.dirname(manifest_path)
            os.makedirs(folder, exist_ok=True)  # before the listings: it may be in one
            own = {os.path.basename(plan_file), os.path.basename(plan_file) + ".tmp"}
            dirs = {}
            for d, seen in self.recorder.dirs.items():
                if (d + os.sep).startswith(cache_dir):
                    continue
                mine = set(own)
                if cache_dir.startswith(d + os.sep):  # the entry's own directory, made here
                    mine.add(cache_dir[len(d) + 1:].split(os.sep)[0])
                dirs[d] = _listing_at_end(d, seen, mine)
            try:
                kept = [e for e in self._entries() if isinstance(e, dict) and "plan" in e]
            except (OSError, ValueError, KeyError, TypeError):
                kept = []
            fd, plan_path = tempfile.mkstemp(dir=folder, prefix=self.key + ".",
                                             suffix=".plan.json")
            with os.fdopen(fd, "wb") as dst, open(plan_file, "rb") as src:
                for block in iter(lambda: src.read(1 << 20), b""):
                    dst.write(block)
            env = {"all": sorted(map(list, os.environ.items())) if self.recorder.env_all
                   else None, "read": self.recorder.env}
            entry = {"plan": os.path.basename(plan_path), "files": states, "dirs": dirs,
                     "env": env}
            # the new entry first; an older one with the same record of variables is
            # replaced (its files changed), and the oldest beyond KEPT_VARIANTS dropped
            others = [e for e in kept if e.get("env") != env]
            entries = [entry] + others[:KEPT_VARIANTS - 1]
            manifest = {"format": FORMAT, "key": self.key, "entries": entries}
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(manifest, f)
            os.replace(tmp, manifest_path)
            live = {e["plan"] for e in entries}
            for e in kept:
                if os.path.basename(e["plan"]) not in live:
                    try:
                        os.unlink(os.path.join(folder, os.path.basename(e["plan"])))
                    except OSError:
                        pass
        except (OSError, ValueError):
            pass
