#!/usr/bin/env bash
# The kernel's own accounting of sys_enter's and sys_exit's run time
# (kernel.bpf_stats_enabled) for stat and the doctor on a tight getppid
# loop, interleaved round by round: ns a run of each program, which does not
# scatter with the host's phase as wall-clock time does. Each run counts
# only the programs of the sysray process under test (its fds), but they
# run for every syscall on the host: a busy host's other calls are in the
# average too. MODES picks sysray's commands (default "stat doctor";
# "record" writes a capture of every call). PREV=DIR adds, for each mode
# but stat, the same command of another build (DIR/sysray).
# LOOP=read times 1-byte reads of /dev/zero instead, LOOP=read-dns the
# same with a UDP socket connected to port 53 held open (bench/read_loop.c:
# the DNS follower's worst case, a table lookup on each read).
#
#   [MODES="stat doctor record"] [LOOP=getppid|read|read-dns] bash bench/doctor-bpfstats.sh [ROUNDS] [CALLS]
#
# Needs root and bpftool. The accounting adds its own clock reads to every
# run (~40 ns here); it is left as it was found.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${1:-3}
CALLS=${2:-3000000}
command -v bpftool >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bpftool >/dev/null)
work=$(mktemp -d)
was=$(sysctl -n kernel.bpf_stats_enabled)
trap '[ "$was" = 1 ] || sysctl -q kernel.bpf_stats_enabled=0; rm -rf "$work"' EXIT
LOOP=${LOOP:-getppid}
MODES=${MODES:-stat doctor}
case $LOOP in
getppid) gcc -O2 -static -o "$work/loop" bench/getppid_loop.c; args= ;;
read) gcc -O2 -static -o "$work/loop" bench/read_loop.c; args= ;;
read-dns) gcc -O2 -static -o "$work/loop" bench/read_loop.c; args=dns ;;
*) echo "LOOP: getppid, read or read-dns" >&2; exit 2 ;;
esac
make -s build
sysctl -q kernel.bpf_stats_enabled=1

# one NAME SYSRAY MODE: appends "NAME enter_ns exit_ns" to $work/rows.
one() {
	local name=$1 s=$2 mode=$3 out=(-o "$work/out")
	[ "$mode" = record ] && out=(-w "$work/out.sysray")
	"$s" "$mode" "${out[@]}" -- sh -c "sleep 0.3; $work/loop $CALLS $args >/dev/null; sleep 0.5" 2>/dev/null &
	local pid=$!
	: >"$work/last"
	while kill -0 "$pid" 2>/dev/null; do
		cat /proc/"$pid"/fdinfo/* 2>/dev/null | awk '/^prog_id:/{print $2}' | sort -u >"$work/ids" || true
		if [ -s "$work/ids" ] && bpftool prog show -j >"$work/snap" 2>/dev/null; then
			python3 - "$work/ids" "$work/snap" >"$work/cur" <<'PY' && [ -s "$work/cur" ] && cp "$work/cur" "$work/last"
import json, sys
ids = set(open(sys.argv[1]).read().split())
ns = {}
for p in json.load(open(sys.argv[2])):
    if str(p["id"]) in ids and p.get("run_cnt"):
        ns[p["name"]] = p["run_time_ns"] / p["run_cnt"]
if "sys_enter" in ns and "sys_exit" in ns:
    print("%.1f %.1f" % (ns["sys_enter"], ns["sys_exit"]))
PY
		fi
		sleep 0.2
	done
	wait "$pid" || true
	echo "$name $(cat "$work/last")" >>"$work/rows"
	# The kernel frees the maps of the run that ended after it exits; a
	# run started at once shares the CPUs with that (a doctor after a
	# doctor read 20% higher than one after stat, in one run of 10 rounds).
	sleep 3
}

: >"$work/rows"
for ((r = 1; r <= ROUNDS; r++)); do
	# The runs take turns at going first: reversed every other round.
	# Whichever runs first in a round read about 5% higher here (the same
	# pair of builds, swapped: +6.3% and -0.1%).
	runs=()
	for m in $MODES; do
		runs+=("$m bin/sysray $m")
		[ -n "${PREV:-}" ] && [ "$m" != stat ] && runs+=("prev-$m $PREV/sysray $m")
	done
	if ((r % 2 == 0)); then
		for ((i = ${#runs[@]} - 1; i >= 0; i--)); do
			one ${runs[i]}
		done
	else
		for run in "${runs[@]}"; do
			one $run
		done
	fi
done
echo "## BPF run time on a $LOOP loop: $CALLS calls, $ROUNDS rounds, medians"
echo
echo "| mode | sys_enter ns/run | sys_exit ns/run | both |"
echo "|---|---:|---:|---:|"
for m in $(awk '{print $1}' "$work/rows" | awk '!seen[$0]++'); do
	e=$(awk -v m="$m" '$1==m{print $2}' "$work/rows" | median)
	x=$(awk -v m="$m" '$1==m{print $3}' "$work/rows" | median)
	b=$(awk -v m="$m" '$1==m{print $2+$3}' "$work/rows" | median)
	printf '| %s | %.1f | %.1f | %.1f |\n' "$m" "$e" "$x" "$b"
done
echo
echo "Rounds (mode, sys_enter and sys_exit ns/run):"
sed 's/^/    /' "$work/rows"
