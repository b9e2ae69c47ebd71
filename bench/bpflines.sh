#!/usr/bin/env bash
# Where the hot path's time goes, by source line: perf samples a tight
# getppid loop on the CPU clock (no PMU needed) under each of sysray's
# modes, and each sample in a BPF program is put on the source line whose
# JIT code it fell in (bench/jitlines, from the programs' line info). The
# modes run interleaved, ROUNDS times; a mode prev-X runs X with
# $PREV/sysray, another build, in the same rounds. For each mode: the
# medians over the rounds of the loop's ns a call and of each BPF
# program's ns a call (its share of the loop's samples times the loop's ns
# a call), then, from the last round, the lines that took the most. A
# sample lands on the line whose code it is in or just after (skid), so
# read a line's figure together with its neighbours'.
#
#   [MODES="stat doctor"] [PREV=DIR] [TOP=25] bash bench/bpflines.sh [ROUNDS] [CALLS]
#
# Needs root, and perf (installed when missing). The BPF_STATS accounting
# of bench/doctor-bpfstats.sh adds two clock reads to every program run;
# this adds nothing to a run but the sampling interrupts.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${1:-5}
CALLS=${2:-4000000}
MODES=${MODES:-stat doctor}
TOP=${TOP:-25}
command -v perf >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -static -o "$work/loop" bench/getppid_loop.c
make -s build
CGO_ENABLED=0 go build -o "$work/jitlines" ./bench/jitlines

for ((r = 1; r <= ROUNDS; r++)); do
	for m in $MODES; do
		bin=bin/sysray cmd=$m
		if [[ $m == prev-* ]]; then
			bin=${PREV:?prev- modes need PREV}/sysray cmd=${m#prev-}
		fi
		"$bin" "$cmd" -o "$work/$m.out" -- perf record -q -e cpu-clock -F 20000 -o "$work/$m.data" "$work/loop" "$CALLS" >"$work/$m.loop" 2>"$work/$m.err" &
		spid=$!
		# The programs' line tables while they are loaded: the JIT
		# addresses are those of this load.
		for _ in $(seq 50); do
			sleep 0.1
			"$work/jitlines" "$spid" >"$work/$m.lines" 2>/dev/null && grep -q sys_exit "$work/$m.lines" && break
		done
		wait "$spid" || { echo "bench: sysray $m failed: $(tail -3 "$work/$m.err")" >&2; exit 1; }
		[ -s "$work/$m.lines" ] || { echo "bench: no line table for $m" >&2; exit 1; }
		perf script -i "$work/$m.data" -F ip,sym 2>/dev/null | awk 'NF >= 2 {print $1, $2}' >"$work/$m.ips"
		ns=$(grep -E '^[0-9.]+$' "$work/$m.loop" | tail -1)
		python3 - "$work/$m.lines" "$work/$m.ips" "$ns" "$TOP" "$work/$m.top" >>"$work/$m.rounds" <<'PY'
import bisect, collections, sys
lines = []
for l in open(sys.argv[1]):
    a, rest = l.rstrip("\n").split(" ", 1)
    lines.append((int(a, 16), rest.split(" ", 1)[1]))
lines.sort()
addrs = [a for a, _ in lines]
ns = float(sys.argv[3])
by_line, by_prog, total = collections.Counter(), collections.Counter(), 0
for l in open(sys.argv[2]):
    ip, sym = l.split()[:2]
    total += 1
    if not sym.startswith("bpf_prog_"):
        continue
    by_prog[sym.split("_", 3)[3]] += 1
    i = bisect.bisect_right(addrs, int(ip, 16)) - 1
    if i >= 0:
        by_line[lines[i][1][:110]] += 1
print(f"loop {ns}")
print(f"all-bpf {ns * sum(by_prog.values()) / total:.1f}")
for p, n in by_prog.items():
    print(f"{p} {ns * n / total:.1f}")
with open(sys.argv[5], "w") as f:
    for s, n in by_line.most_common(int(sys.argv[4])):
        f.write(f"  {ns * n / total:6.1f} ns  {s}\n")
PY
	done
done
for m in $MODES; do
	echo "== sysray $m: medians of $ROUNDS rounds, ns a call"
	for k in $(awk '{print $1}' "$work/$m.rounds" | awk '!seen[$0]++'); do
		printf '  %8s  %s\n' "$(awk -v k="$k" '$1 == k {print $2}' "$work/$m.rounds" | median)" "$k"
	done
	echo "  the last round's lines:"
	cat "$work/$m.top"
done
