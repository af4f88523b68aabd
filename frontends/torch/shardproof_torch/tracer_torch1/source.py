"""Source locations: the innermost frame outside torch (and outside this front end)."""
import functools
import os
import sys

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _library_dirs():
    dirs = [_PKG_DIR]
    for name in ("torch", "functorch"):
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "__file__", None):
            dirs.append(os.path.dirname(os.path.abspath(mod.__file__)))
    import contextlib
    import functools
    dirs.append(os.path.dirname(os.path.abspath(contextlib.__file__)))  # the stdlib
    return tuple(d + os.sep for d in dirs)


_DIRS = None


@functools.lru_cache(maxsize=None)
def is_user_file(filename):
    global _DIRS
    if _DIRS is None:
        _DIRS = _library_dirs()
    if not filename or filename.startswith("<"):
        return False
    path = os.path.abspath(filename)
    return not path.startswith(_DIRS)


_BOUNDARIES = set()


def capture_boundary(fn):
    """Marks the function that runs a program: frames outside it (a test, a script that
    called capture in process) are never the program's source."""
    _BOUNDARIES.add(fn.__code__)
    return fn


def user_src(skip=1):
    """{"file", "line", "function"} of the innermost user frame on the stack below the
    capture boundary, or None."""
    f = sys._getframe(skip)
    while f is not None:
        if f.f_code in _BOUNDARIES:
            return None
        if is_user_file(f.f_code.co_filename):
            return {"file": _rel(f.f_code.co_filename), "line": f.f_lineno,
                    "function": f.f_code.co_name}
        f = f.f_back
    return None


@functools.lru_cache(maxsize=None)
def _rel(filename):
    from ..errors import relpath
    return relpath(filename)
