#!/usr/bin/env bash
# The agent's own CPU at its defaults, idle and under redis-benchmark GET
# load: user and system time from /proc/PID/stat and context switches from
# /proc/PID/task/*/status, over IDLE seconds from SETTLE seconds after its
# start, then over one redis-benchmark run. Builds are interleaved round by
# round; the table gives medians. The server's throughput (bench/redis.sh)
# scatters more than the agent's share of it; this resolves the agent's
# share: its CPU per GET beside the machine's (CPUs x seconds / GETs).
#
#   bash bench/agentcpu.sh [ROUNDS] [REQUESTS] [SYSRAY...]
#
# SYSRAY... are sysray binaries to compare (default: this checkout's, and
# $PREV/sysray when PREV is set). Needs root and redis (installed when
# missing). Everything listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${1:-3}
REQS=${2:-1000000}
shift $(($# < 2 ? $# : 2))
SETTLE=${SETTLE:-15}
IDLE=${IDLE:-20}

need_redis
port=16381
start_redis $port
sysray_bins "$@"
tick=$(getconf CLK_TCK)
cpus=$(nproc)

# cpu PID: the process's user + system ticks; switches PID: its threads' context switches.
cpu() { awk '{print $14 + $15}' /proc/"$1"/stat; }
switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/{s += $2} END{print s}'; }

declare -A idle sw busy share
for r in $(seq "$ROUNDS"); do
	for b in "${bins[@]}"; do
		rm -rf "$work/caps"
		"$b" agent --listen 127.0.0.1:0 --capture-dir "$work/caps" >/dev/null 2>&1 &
		pid=$!
		sleep "$SETTLE"
		c0=$(cpu $pid) s0=$(switches $pid)
		sleep "$IDLE"
		c1=$(cpu $pid) s1=$(switches $pid)
		t0=$(date +%s.%N)
		redis-benchmark -p $port -n "$REQS" -c 50 -t get -q >/dev/null 2>&1
		t1=$(date +%s.%N)
		c2=$(cpu $pid)
		kill -INT $pid
		wait $pid || true
		i=$(awk -v a="$c0" -v b="$c1" -v t="$tick" -v s="$IDLE" 'BEGIN{printf "%.1f", (b - a) / t * 1000 / s}')
		w=$(awk -v a="$s0" -v b="$s1" -v s="$IDLE" 'BEGIN{printf "%.0f", (b - a) / s}')
		g=$(awk -v a="$c1" -v b="$c2" -v t="$tick" -v n="$REQS" 'BEGIN{printf "%.0f", (b - a) / t * 1e9 / n}')
		m=$(awk -v a="$c1" -v b="$c2" -v t="$tick" -v t0="$t0" -v t1="$t1" -v c="$cpus" 'BEGIN{printf "%.2f", (b - a) / t / ((t1 - t0) * c) * 100}')
		idle[$b]+="$i " sw[$b]+="$w " busy[$b]+="$g " share[$b]+="$m "
		echo "round $r: $b: idle $i ms/s, $w switches/s; under redis $g ns a GET, $m% of the machine" >&2
	done
done

echo "## The agent's own CPU at its defaults: idle ($IDLE s from $SETTLE s after its start), then under redis-benchmark GET ($REQS requests, 50 clients); medians of $ROUNDS rounds"
echo
echo "kernel $(uname -r), $cpus CPUs, $(date -u +'%F %H:%M UTC')"
echo
echo "| sysray | idle: ms of CPU a second | idle: switches a second | under redis: ns of CPU a GET | under redis: % of the machine's CPU |"
echo "|---|---:|---:|---:|---:|"
for b in "${bins[@]}"; do
	echo "| $b | $(echo "${idle[$b]}" | median) | $(echo "${sw[$b]}" | median) | $(echo "${busy[$b]}" | median) | $(echo "${share[$b]}" | median) |"
done
