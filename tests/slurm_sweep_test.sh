#!/usr/bin/env bash
# CTest `slurm_sweep` (label slurm): a small sweep through a real single-node Slurm cluster
# (scripts/slurm-local) against the same spec run locally: the merged results must hold the same
# points with the same accuracy and agreement, each with a measured speed; the speed ratio is
# printed, not checked (3 workers share this machine's cores with each other and with other tests,
# which halved it in CI). Skipped (exit 77) without Slurm or root.
# usage: slurm_sweep_test.sh CLI SOURCE_DIR WORK_DIR
set -euo pipefail
cli=$1; src=$2; work=$3
command -v slurmctld >/dev/null || { echo "skipped: Slurm is not installed (apt-get install slurm-wlm munge)"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "skipped: starting a Slurm cluster needs root"; exit 77; }
rm -rf "$work"; mkdir -p "$work"
if [ -n "${SLURM_CONF:-}" ] && sinfo >/dev/null 2>&1; then
  echo "using the running cluster of SLURM_CONF=$SLURM_CONF"
elif pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null; then
  echo "skipped: a Slurm cluster is already running on this host; set SLURM_CONF to test with it"
  exit 77
else
  trap '"$src/scripts/slurm-local" stop "$work/cluster"' EXIT
  conf=$("$src/scripts/slurm-local" start "$work/cluster")
  eval "$conf"
fi
cat > "$work/spec.json" <<'SPEC'
{"format": "cachelens-sweep", "version": 1, "name": "slurm-test",
 "tasks": {"families": ["arith"], "items": 2, "seed": 5},
 "sampler": {"gen_length": 32, "block_length": 16, "steps": 32},
 "policies": [
   {"policy": "dkv-decode", "params": {"refresh_interval": [2, 8]}},
   {"policy": "dllm-cache", "sampling": "random", "points": 2, "params": {"rho": {"min": 0.1, "max": 0.5}, "metric": ["v-cosine", "k-cosine"]}}
 ]}
SPEC
export OPENBLAS_NUM_THREADS=1
"$cli" sweep run "$work/spec.json" --out "$work/local.clsweep" > "$work/local.txt"
# Bounded well inside CTest's 300 s, so that a stuck scheduler fails with its own account (and the
# trap still stops the cluster) instead of a bare CTest timeout that leaves the daemons running.
if ! timeout 180 "$cli" sweep run "$work/spec.json" --out "$work/slurm.clsweep" --executor slurm \
    --workers 3 --wait > "$work/slurm.txt" 2>&1; then
  echo "the Slurm sweep failed or ran past 180 s; its output, the queue and the nodes:"
  cat "$work/slurm.txt"; squeue -a || true; sinfo -N -l || true
  tail -n 20 "$work"/cluster/*.log 2>/dev/null || true
  exit 1
fi
"$cli" sweep frontier "$work/local.clsweep" --json "$work/local.json" > /dev/null
"$cli" sweep frontier "$work/slurm.clsweep" --json "$work/slurm.json" > /dev/null
"$src/scripts/compare-sweeps" "$work/local.json" "$work/slurm.json"
