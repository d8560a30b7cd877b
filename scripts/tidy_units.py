#!/usr/bin/env python3
"""Writes BUILD/tidy/compile_commands.json (the build's commands without GCC's precompiled-header
flags, which clang cannot read, and without -fopenmp: clang-tidy's resource directory has no
omp.h, and LibTorch's parallel loops parse as their one-thread fallback) and prints the project's
translation units. Units that include LibTorch are checked as C++17: clang cannot parse LibTorch
1.13's headers against libstdc++ 12 in C++20 mode (c10::IValue is incomplete inside a constexpr
std::vector), and nothing of C++20 that those units use changes meaning in C++17 for clang
(designated initialisers are an extension there).

With --cache DIR VERSION it prints only the units whose result is not in DIR yet: a unit's key is a
hash of clang-tidy's version, .clang-tidy, the unit's command and every file it includes (the
project's by content, the system's by path, size and time), and BUILD/tidy/keys.txt lists each
printed unit's key for scripts/tidy to mark clean. usage: scripts/tidy_units.py BUILD [--cache DIR
VERSION]"""
import hashlib
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
project = tuple(os.path.join(root, d) + os.sep for d in ("engine", "app", "viz", "sessions", "sweep", "bridge", "bench"))

cleaned = []
for entry in commands:
    entry = dict(entry)
    entry["command"] = re.sub(r"-include \S+cmake_pch\.hxx", "", entry["command"]).replace(
        "-Winvalid-pch", "").replace("-fopenmp", "")
    cleaned.append(entry)
cache = sys.argv[3] if len(sys.argv) > 4 and sys.argv[2] == "--cache" else None
version = sys.argv[4] if cache else ""


def dependencies(entry):
    args = shlex.split(entry["command"])
    if "-o" in args:
        i = args.index("-o")
        del args[i:i + 2]
    args = [a for a in args if a != "-c"] + ["-M"]
    out = subprocess.run(args, cwd=entry["directory"], capture_output=True, text=True).stdout
    return out.replace("\\\n", " ").split()[1:]  # after "unit.o:"


def includes_torch(deps):
    return any(k in d for d in deps for k in ("/torch/", "/ATen/", "/c10/"))


def unit_key(entry, deps):
    h = hashlib.sha256()
    h.update(version.encode())
    h.update(open(os.path.join(root, ".clang-tidy"), "rb").read())
    # The clone's own path is left out, so that another clone of the same tree finds its results.
    h.update(entry["command"].replace(root, "<root>").encode())
    for d in deps:
        path = os.path.normpath(os.path.join(entry["directory"], d))
        h.update(path.replace(root, "<root>").encode())
        if path.startswith(root + os.sep):
            h.update(open(path, "rb").read())
        else:
            st = os.stat(path)
            h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


# .cu files are nvcc's (clang-tidy cannot take its flags); their CPU references are .cpp.
units = [e for e in cleaned if e["file"].startswith(project) and not e["file"].endswith(".cu")]
with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
    deps = list(pool.map(dependencies, units))
torch = [includes_torch(d) for d in deps]
for entry, t in zip(units, torch):
    if t:
        entry["command"] = re.sub(r"-std=(c|gnu)\+\+20", "-std=c++17", entry["command"])
os.makedirs(os.path.join(build, "tidy"), exist_ok=True)
json.dump(cleaned, open(os.path.join(build, "tidy", "compile_commands.json"), "w"), indent=1)
keys = [unit_key(e, d) for e, d in zip(units, deps)] if cache else [""] * len(units)
todo = [(e, k) for e, k in zip(units, keys) if not (cache and os.path.exists(os.path.join(cache, k)))]
with open(os.path.join(build, "tidy", "keys.txt"), "w") as f:
    for entry, key in todo:
        f.write(f"{key} {entry['file']}\n")
for entry, _ in todo:
    print(entry["file"])
print(f"{len(units)} units, {sum(torch)} of them with LibTorch (checked as C++17); "
      f"{len(units) - len(todo)} clean in the cache", file=sys.stderr)
