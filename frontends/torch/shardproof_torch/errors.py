"""Errors the front end reports to the user, and the exit codes they map to."""
import os

EXIT_OK = 0
EXIT_INVALID = 2    # invalid harness or a program that cannot be captured
EXIT_INTERNAL = 4   # a bug of ours, or an I/O failure


class CaptureError(Exception):
    """A harness or program the front end refuses: printed as `file:line: [rule] text`."""

    def __init__(self, rule, text, file=None, line=None):
        super().__init__(text)
        self.rule = rule
        self.text = text
        self.file = file
        self.line = line

    def __reduce__(self):  # pickled back from the second capture process (forked.py)
        return (CaptureError, (self.rule, self.text, self.file, self.line))

    def message(self):
        where = ""
        if self.file:
            where = f"{self.file}:{self.line or 1}: "
        return f"{where}[{self.rule}] {self.text}"


def here_of(src):
    """(file, line) of a source-location dict, or (None, None)."""
    if not src:
        return None, None
    return src.get("file"), src.get("line")


def error_at(src, rule, text):
    file, line = here_of(src)
    return CaptureError(rule, text, file, line)


def relpath(path):
    try:
        rel = os.path.relpath(path)
        return rel if not rel.startswith("..") else path
    except ValueError:
        return path
