#!/usr/bin/env bash
# What `sysray record` itself costs per event on a real server: its user
# and system CPU (from /proc/PID/stat) while it records the whole host
# under redis-benchmark GET load, divided by the events it wrote. Unlike
# the server's throughput (bench/redis.sh), which scatters by ±10% from
# round to round on these VMs, this resolves a change of a few percent in
# the reader, the merger, the encoder or the codec. Builds are interleaved round
# by round; the table gives medians.
#
#   bash bench/recordcpu.sh [ROUNDS] [REQUESTS] [SYSRAY...]
#
# SYSRAY... are sysray binaries to compare (default: this checkout's, and
# $PREV/sysray when PREV is set). Needs root and redis (installed when
# missing). The server listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${1:-5}
REQS=${2:-300000}
shift $(($# < 2 ? $# : 2))

need_redis
port=16380
start_redis $port
sysray_bins "$@"
tick=$(getconf CLK_TCK)

declare -A per
for r in $(seq "$ROUNDS"); do
	for b in "${bins[@]}"; do
		"$b" record -w "$work/r.sysray" >/dev/null 2>"$work/err" &
		pid=$!
		sleep 1.5 # attached, and idle before the load
		redis-benchmark -p $port -n "$REQS" -c 50 -t get -q >/dev/null 2>&1
		read -r ut st < <(awk '{print $14, $15}' /proc/$pid/stat)
		kill -INT $pid
		wait $pid
		ev=$(grep -o 'wrote [0-9]*' "$work/err" | grep -o '[0-9]*' | sort -n | tail -1)
		if grep -q 'were lost' "$work/err"; then
			echo "bench: $b dropped events: $(grep -m1 'were lost' "$work/err")" >&2
		fi
		ns=$(awk -v u="$ut" -v s="$st" -v t="$tick" -v e="$ev" 'BEGIN{printf "%.0f", (u+s)/t*1e9/e}')
		per[$b]+="$ns "
		echo "round $r: $b: $(((ut + st) * 1000 / tick)) ms of CPU for $ev events, $ns ns an event" >&2
	done
done

echo "## sysray record's own CPU per event, whole host under redis-benchmark GET ($REQS requests x $ROUNDS rounds, 50 clients); medians"
echo
echo "kernel $(uname -r), $(nproc) CPUs, $(date -u +%F)"
echo
echo "| sysray | ns of CPU an event | samples |"
echo "|---|---:|---|"
for b in "${bins[@]}"; do
	echo "| $b | $(echo "${per[$b]}" | median) | ${per[$b]}|"
done
