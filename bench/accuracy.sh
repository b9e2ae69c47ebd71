#!/usr/bin/env bash
# Percentiles from sysray stat's in-kernel histograms against exact values
# from a full record of the same run: both sysray instances watch the same
# process at the same time.
#
#   bash bench/accuracy.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null; rm -rf "$work"' EXIT
make -s build
gcc -O2 -o "$work/mixed" bench/mixed.c
"$work/mixed" & pid=$!
sleep 0.2
./bin/sysray stat -p $pid --duration ${SECS}s --json -o "$work/stat.json" &
s=$!
./bin/sysray record -p $pid --duration ${SECS}s -w "$work/r.sysray" 2>"$work/rec.err"
wait $s
grep -q "were lost" "$work/rec.err" && { echo "record dropped events; the comparison would be unfair" >&2; exit 1; }
./bin/sysray read --json "$work/r.sysray" > "$work/events.json"
python3 - "$work/stat.json" "$work/events.json" <<'PY'
import json, sys
stat = {r["name"]: r for r in json.load(open(sys.argv[1]))["rows"]}
lat = {}
for line in open(sys.argv[2]):
    e = json.loads(line)
    s = e.get("syscall")
    if s and not s.get("unfinished"):
        lat.setdefault(s["name"], []).append(s["latency_ns"])
print("| syscall | calls (record / stat) | p50 exact / stat | p90 exact / stat | p99 exact / stat | worst error |")
print("|---|---:|---:|---:|---:|---:|")
for name in sorted(lat, key=lambda n: -len(lat[n])):
    v = sorted(lat[name])
    r = stat.get(name)
    if not r or len(v) < 100:
        continue
    def q(p): return v[int(p * (len(v) - 1))]
    errs = []
    cells = []
    for p, key in ((0.5, "p50_ns"), (0.9, "p90_ns"), (0.99, "p99_ns")):
        exact, got = q(p), r[key]
        errs.append(abs(got - exact) / exact if exact else 0)
        cells.append(f"{exact} / {got}")
    print(f"| {name} | {len(v)} / {r['calls']} | " + " | ".join(cells) + f" | {100*max(errs):.1f}% |")
PY
echo
echo "Stated bound: 12.5% (log-linear buckets, 4 per power of two). The two tools start and stop a few ms apart, so call counts differ slightly."
