#!/usr/bin/env python3
"""Checks every #include "..." in the tree against the table of engine/README.md
("Who may include whom"): the table is the layering rule, this test its only
enforcement. Also checks that the rooms below engine/ form a DAG, so a row
added to the table cannot bring a circle back.

    tests/layering_test.py [SOURCE_ROOT]
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), ".."))
CODE_ROOTS = ["engine", "cache", "daemon", "cli", "planner", "hooks"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)\|\s*$")


def read_table():
    """room -> set of rooms it may include, from engine/README.md."""
    text = open(os.path.join(ROOT, "engine", "README.md"), encoding="utf-8").read()
    section = text.split("## Who may include whom", 1)[1]
    rules = {}
    for line in section.splitlines():
        m = ROW.match(line)
        if not m or m.group(1) == "room":
            continue
        cell = m.group(2)
        allowed = set(re.findall(r"`([^`]+)`", cell))
        rules[m.group(1)] = (allowed, "every `engine/...` room" in cell)
    return rules


def room_of(path):
    """The room of a repository path: its folder under engine/, else its top folder."""
    parts = path.split("/")
    if parts[0] == "engine":
        return "/".join(parts[:-1])
    return parts[0]


def may_include(rules, src, dst):
    if src == dst:
        return True
    allowed, every_engine_room = rules[src]
    return dst in allowed or (every_engine_room and dst.startswith("engine/"))


def main():
    rules = read_table()
    problems = []
    files = 0
    for top in CODE_ROOTS:
        for folder, _, names in os.walk(os.path.join(ROOT, top)):
            for name in names:
                if not name.endswith((".h", ".cpp")):
                    continue
                path = os.path.relpath(os.path.join(folder, name), ROOT)
                files += 1
                src = room_of(path)
                if src not in rules:
                    problems.append(f"{path}: room {src} is not in engine/README.md's table")
                    continue
                text = open(os.path.join(ROOT, path), encoding="utf-8").read()
                for inc in INCLUDE.findall(text):
                    if not os.path.exists(os.path.join(ROOT, inc)):
                        continue  # generated or system-like header
                    dst = room_of(inc)
                    if not may_include(rules, src, dst):
                        problems.append(f"{path}: includes {inc} ({src} may not include {dst})")
    # The table itself must be a DAG below engine/.
    engine_rooms = {r: a for r, (a, _) in rules.items() if r.startswith("engine/")}
    state = {}

    def visit(r, trail):
        if state.get(r) == 1:
            problems.append("circle in the table: " + " -> ".join(trail + [r]))
            return
        if state.get(r) == 2:
            return
        state[r] = 1
        for d in sorted(engine_rooms.get(r, ())):
            if d in engine_rooms:
                visit(d, trail + [r])
        state[r] = 2

    for r in sorted(engine_rooms):
        visit(r, [])
    if files < 100:
        problems.append(f"only {files} source files found under {ROOT}: wrong root?")
    for p in problems:
        print(p)
    print(f"layering: {files} files, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
