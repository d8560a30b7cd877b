#!/usr/bin/env python3
"""Writes BUILD/tidy/compile_commands.json (the build's commands without GCC's precompiled-header
flags, which clang cannot read) and prints the project's translation units that clang-tidy can
check: those that do not include LibTorch. Clang 14 cannot parse Debian's LibTorch 1.13 headers
in C++20 (c10::IValue is incomplete inside std::vector), so those units are checked by GCC's
warnings and the sanitizers only. usage: scripts/tidy_units.py BUILD"""
import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

build = sys.argv[1]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
commands = json.load(open(os.path.join(build, "compile_commands.json")))
project = tuple(os.path.join(root, d) + os.sep for d in ("engine", "app", "viz", "sessions", "bench"))

cleaned = []
for entry in commands:
    entry = dict(entry)
    entry["command"] = re.sub(r"-include \S+cmake_pch\.hxx", "", entry["command"]).replace(
        "-Winvalid-pch", "")
    cleaned.append(entry)
os.makedirs(os.path.join(build, "tidy"), exist_ok=True)
json.dump(cleaned, open(os.path.join(build, "tidy", "compile_commands.json"), "w"), indent=1)


def includes_torch(entry):
    args = shlex.split(entry["command"])
    if "-o" in args:
        i = args.index("-o")
        del args[i:i + 2]
    args = [a for a in args if a != "-c"] + ["-M"]
    out = subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True).stdout
    return any(k in out for k in ("/torch/", "/ATen/", "/c10/"))


units = [e for e in cleaned if e["file"].startswith(project)]
with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
    torch = list(pool.map(includes_torch, units))
for entry, t in zip(units, torch):
    if not t:
        print(entry["file"])
print(f"{sum(not t for t in torch)} of {len(units)} units without LibTorch", file=sys.stderr)
