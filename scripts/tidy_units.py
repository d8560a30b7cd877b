#!/usr/bin/env python3
"""Writes BUILD/tidy/compile_commands.json (the build's commands without GCC's precompiled-header
flags, which clang cannot read, and without -fopenmp: clang-tidy's resource directory has no
omp.h, and LibTorch's parallel loops parse as their one-thread fallback) and prints the project's
translation units. Units that include LibTorch are checked as C++17: clang cannot parse LibTorch
1.13's headers against libstdc++ 12 in C++20 mode (c10::IValue is incomplete inside a constexpr
std::vector), and nothing of C++20 that those units use changes meaning in C++17 for clang
(designated initialisers are an extension there). usage: scripts/tidy_units.py BUILD"""
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
        "-Winvalid-pch", "").replace("-fopenmp", "")
    cleaned.append(entry)
def includes_torch(entry):
    args = shlex.split(entry["command"])
    if "-o" in args:
        i = args.index("-o")
        del args[i:i + 2]
    args = [a for a in args if a != "-c"] + ["-M"]
    out = subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True).stdout
    return any(k in out for k in ("/torch/", "/ATen/", "/c10/"))


# .cu files are nvcc's (clang-tidy cannot take its flags); their CPU references are .cpp.
units = [e for e in cleaned if e["file"].startswith(project) and not e["file"].endswith(".cu")]
with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
    torch = list(pool.map(includes_torch, units))
for entry, t in zip(units, torch):
    if t:
        entry["command"] = re.sub(r"-std=(c|gnu)\+\+20", "-std=c++17", entry["command"])
os.makedirs(os.path.join(build, "tidy"), exist_ok=True)
json.dump(cleaned, open(os.path.join(build, "tidy", "compile_commands.json"), "w"), indent=1)
for entry in units:
    print(entry["file"])
print(f"{len(units)} units, {sum(torch)} of them with LibTorch (checked as C++17)", file=sys.stderr)
