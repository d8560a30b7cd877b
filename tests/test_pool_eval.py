#!/usr/bin/env python3
"""Checks scripts/pool-eval: pooled counts and exact McNemar p-values against hand-computed ones,
and a one-line error naming the file for input that is not an eval result.
usage: test_pool_eval.py PATH/TO/pool-eval"""
import json
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def row(policy, items, correct, fixed=None, broken=None):
    r = {"task": "arith", "policy": policy, "items": items, "correct": correct}
    if fixed is not None:
        r.update({"fixed_vs_none": fixed, "broken_vs_none": broken})
    return r


with tempfile.TemporaryDirectory() as d:
    a, b, bad = (os.path.join(d, n) for n in ("a.json", "b.json", "bad.json"))
    json.dump([row("none", 150, 126), row("x", 150, 123, 1, 4)], open(a, "w"))
    json.dump([row("none", 150, 123), row("x", 150, 121, 1, 3)], open(b, "w"))
    json.dump([{"task": "arith"}], open(bad, "w"))
    not_list = os.path.join(d, "dict.json")
    json.dump({"task": "arith"}, open(not_list, "w"))

    out = subprocess.run([sys.executable, script, a, b], capture_output=True, text=True)
    check(out.returncode == 0, f"exit {out.returncode}: {out.stderr}")
    lines = {l.split()[1]: l.split() for l in out.stdout.splitlines()[1:]}
    # none: 249 of 300 = 83.0%; x: 244 of 300 = 81.3%, fixed 2, broken 7:
    # p = 2 * (C(9,0) + C(9,1) + C(9,2)) / 2^9 = 92 / 512 = 0.1797
    check(lines.get("none", [])[2:4] == ["300", "83.0%"], f"none row: {lines.get('none')}")
    check(lines.get("x", [])[2:6] == ["300", "81.3%", "+2/-7", "0.180"], f"x row: {lines.get('x')}")

    # One sample, balanced counts: p = 1.
    out = subprocess.run([sys.executable, script, a], capture_output=True, text=True)
    x = [l.split() for l in out.stdout.splitlines() if l.split()[1:2] == ["x"]]
    check(x and x[0][4:6] == ["+1/-4", "0.375"], f"one-sample x row: {x}")  # 2*(1+5)/32

    for path in (bad, not_list, os.path.join(d, "missing.json")):
        out = subprocess.run([sys.executable, script, path], capture_output=True, text=True)
        check(out.returncode == 2, f"{path}: exit {out.returncode} for malformed input (want 2)")
        check(path in out.stderr and "Traceback" not in out.stderr, f"error message: {out.stderr!r}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("pool-eval: pooled counts, p-values and errors as expected")
