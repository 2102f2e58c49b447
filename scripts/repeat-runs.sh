#!/usr/bin/env bash
# Runs a Phase 1 target N times in a row and prints one Markdown table row
# per run (for docs/results.md): outcome counts, wall time, startup,
# TC-06 t1, the machine's peak memory in use during the run, and any failed
# case with its message.
# Usage: [TARGET=phase1_vllm] scripts/repeat-runs.sh [N] [extra harness flags...]
set -u
cd "$(dirname "$0")/.."
n=${1:-10}
shift || true
target=${TARGET:-phase1}
cargo build --quiet --tests
runs=target/phase1/repeat-$target
mkdir -p "$runs"

# Samples MemTotal - MemAvailable once a second into $1 (the highest seen, in
# MiB) until killed: a measurement, not a wait.
sample_peak_memory() {
  local peak=0 used
  while :; do
    used=$(awk '/^MemTotal/ {t=$2} /^MemAvailable/ {a=$2} END {print int((t-a)/1024)}' /proc/meminfo)
    ((used > peak)) && peak=$used && echo "$peak" >"$1"
    sleep 1
  done
}

echo "| # | result | wall s | startup s | TC-06 t1 ms | peak memory GiB | failures |"
echo "|---|---|---|---|---|---|---|"
for i in $(seq 1 "$n"); do
  started=$SECONDS
  sample_peak_memory "$runs/peak-$i" &
  sampler=$!
  cargo test --quiet --test "$target" -- --run-dir "$runs" "$@" >"$runs/run-$i.log" 2>&1
  rc=$?
  kill "$sampler"
  wait "$sampler" 2>/dev/null
  wall=$((SECONDS - started))
  python3 - "$runs/latest/results.json" "$i" "$rc" "$wall" "$(cat "$runs/peak-$i" 2>/dev/null || echo 0)" <<'PY'
import json, sys
path, i, rc, wall = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
peak = int(sys.argv[5]) / 1024
try:
    r = json.load(open(path))
except Exception as e:
    print(f"| {i} | no results ({e}) | {wall:.0f} | | | {peak:.1f} | exit {rc} |")
    sys.exit(0)
cases = r["run"]["cases"]
passed = sum(c["outcome"] == "passed" for c in cases)
failed = [c for c in cases if c["outcome"] == "failed"]
startup = (r["run"].get("stack") or {}).get("total_startup_ms", 0) / 1000
t1 = ((r.get("perf") or {}).get("recovery") or {}).get("t1_ms")
fails = "; ".join(f"{c['name']}: {c.get('message','')[:120]}" for c in failed)
verdict = "green" if rc == 0 and not failed else "RED"
print(f"| {i} | {verdict} {passed}/{len(cases)} | {wall:.0f} | {startup:.1f} | {t1 if t1 is None else round(t1)} | {peak:.1f} | {fails} |")
PY
done
