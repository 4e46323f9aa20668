#!/usr/bin/env bash
# The simulator and ns-3 on the same grid, alternating, in one run (docs/benchmarks.md §4):
#   eval/ns3/bench.sh [REPEATS] [JOBS] [SCENARIO]
# Needs target/release/ccp-eval (`cargo build --release -p ccp-eval`) and ns-3 (`make ns3`).
# Prints the load average before and after and, per run, wall, user and system seconds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repeats="${1:-3}"
jobs="${2:-2}"
scenario="${3:-calibrate-tcp}"
case "$scenario" in
  */*|*.toml) toml="$scenario" ;;
  *) toml="eval/scenarios/$scenario.toml" ;;
esac
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
[ -x target/release/ccp-eval ] || { echo "no target/release/ccp-eval: cargo build --release -p ccp-eval" >&2; exit 1; }
make -s target/ns3/calibrate
echo "start: $(date -u +%FT%TZ) $(uptime)"
for i in $(seq 1 "$repeats"); do
  /usr/bin/time -f "run $i simulator: wall %e s, user %U s, sys %S s" \
    target/release/ccp-eval run "$toml" --out "$out/sim" --jobs "$jobs" >/dev/null
  /usr/bin/time -f "run $i ns-3:      wall %e s, user %U s, sys %S s" \
    python3 eval/ns3/run.py "$toml" --out "$out/ns3" --jobs "$jobs" >/dev/null
done
echo "end:   $(date -u +%FT%TZ) $(uptime)"
