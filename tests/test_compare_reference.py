#!/usr/bin/env python3
"""Checks scripts/compare-reference's input errors: each bad path or value is refused before torch
is imported (so this runs with any Python), with exit code 2 and a message naming it. Its
measurements need torch 2, transformers and the reference checkouts and are not run here.
usage: test_compare_reference.py PATH/TO/compare-reference PATH/TO/cachelens-cli MODEL_DIR"""
import os
import subprocess
import sys
import tempfile

script, cli, model = sys.argv[1:4]
failures = []


def refused(args, needle):
    r = subprocess.run([sys.executable, script] + args, capture_output=True, text=True)
    if r.returncode != 2 or needle not in r.stderr:
        failures.append(f"{args}: exit {r.returncode}, stderr {r.stderr.strip()!r}, expected {needle!r}")


with tempfile.TemporaryDirectory() as d:
    fake = os.path.join(d, "Fast-dLLM")
    os.makedirs(os.path.join(fake, "llada"))
    open(os.path.join(fake, "llada", "generate.py"), "w").close()
    ok = ["--fast-dllm", fake, "--cli", cli, "--model", model]
    refused(["--fast-dllm", d, "--cli", cli, "--model", model], "no llada/generate.py")
    refused(["--fast-dllm", fake, "--cli", cli, "--model", d], "no config.json")
    refused(["--fast-dllm", fake, "--cli", os.path.join(d, "nope"), "--model", model], "not an executable")
    refused(ok + ["--forward", "64,abc"], "comma-separated positive lengths")
    refused(ok + ["--forward", "0"], "comma-separated positive lengths")
    refused(ok + ["--repeats", "0"], "must be positive")
    refused(ok + ["--gen-length", "100", "--block-length", "32"], "not a multiple")
    refused(ok + ["--dkv-cache", d], "no generation_utils/llada_dkv_cache_decode.py")
    refused(ok + ["--dllm-cache", d], "no dllm_cache/hooks/cache_hook_LLaDA.py")
    refused([], "--fast-dllm")  # required

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
