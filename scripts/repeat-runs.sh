#!/usr/bin/env bash
# Runs the Phase 1 suite N times in a row on the CPU stack and prints one
# Markdown table row per run (for docs/run-history.md): outcome counts, wall
# time, startup, TC-06 t1, and any failed case with its message.
# Usage: scripts/repeat-runs.sh [N] [extra harness flags...]
set -u
cd "$(dirname "$0")/.."
n=${1:-10}
shift || true
cargo build --quiet --tests
runs=target/phase1/repeat
mkdir -p "$runs"
echo "| # | result | wall s | startup s | TC-06 t1 ms | failures |"
echo "|---|---|---|---|---|---|"
for i in $(seq 1 "$n"); do
  started=$SECONDS
  cargo test --quiet --test phase1 -- --run-dir "$runs" "$@" >"$runs/run-$i.log" 2>&1
  rc=$?
  wall=$((SECONDS - started))
  python3 - "$runs/latest/results.json" "$i" "$rc" "$wall" <<'PY'
import json, sys
path, i, rc, wall = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
try:
    r = json.load(open(path))
except Exception as e:
    print(f"| {i} | no results ({e}) | {wall:.0f} | | | exit {rc} |")
    sys.exit(0)
cases = r["run"]["cases"]
passed = sum(c["outcome"] == "passed" for c in cases)
failed = [c for c in cases if c["outcome"] == "failed"]
startup = (r["run"].get("stack") or {}).get("total_startup_ms", 0) / 1000
t1 = ((r.get("perf") or {}).get("recovery") or {}).get("t1_ms")
fails = "; ".join(f"{c['name']}: {c.get('message','')[:120]}" for c in failed)
verdict = "green" if rc == 0 and not failed else "RED"
print(f"| {i} | {verdict} {passed}/{len(cases)} | {wall:.0f} | {startup:.1f} | {t1 if t1 is None else round(t1)} | {fails} |")
PY
done
