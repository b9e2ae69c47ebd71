#!/usr/bin/env bash
# A real workload: redis-server and redis-benchmark on loopback, GET
# throughput with the whole host traced by each tool in turn. Rounds
# interleave the tools; the table gives medians.
#
#   bash bench/redis.sh [ROUNDS] [REQUESTS]
#
# Needs root. Installs redis-server, redis-tools, bpftrace, linux-perf and
# strace when missing. The server listens on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${1:-5}
REQS=${2:-200000}

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-benchmark >/dev/null || need+=(redis-tools)
command -v bpftrace >/dev/null || need+=(bpftrace)
command -v perf >/dev/null || need+=(linux-perf)
command -v strace >/dev/null || need+=(strace)
if [ ${#need[@]} -gt 0 ]; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
mountpoint -q /sys/kernel/tracing || mount -t tracefs tracefs /sys/kernel/tracing

port=16379
start_redis $port
make -s build
sysray=$PWD/bin/sysray
CGO_ENABLED=0 go build -o "$work/emptytp" ./bench/emptytp
rpid=$(cat "$work/redis.pid")

# BPF_STATS=1 also has the kernel account each program's run time
# (kernel.bpf_stats_enabled) and prints, per tool, the in-kernel time of
# all BPF programs per GET: what the tool's programs cost the workload,
# free of the throughput's scatter. The accounting itself adds a clock
# read or two to every program run, so the throughput of such a run is
# not comparable with one without it.
bpf_ns() {
	bpftool prog show -j 2>/dev/null | python3 -c 'import json,sys; print(sum(p.get("run_time_ns",0) for p in json.load(sys.stdin)))'
}
if [ "${BPF_STATS:-}" = 1 ]; then
	command -v bpftool >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bpftool >/dev/null)
	sysctl -q kernel.bpf_stats_enabled=1
	trap 'sysctl -q kernel.bpf_stats_enabled=0; stop_redis' EXIT
fi

bench() {
	redis-benchmark -h 127.0.0.1 -p $port -n "$REQS" -c 50 -t get -q 2>/dev/null | grep -oE '[0-9.]+ requests per second' | grep -oE '^[0-9.]+'
}

# Each tool traces the whole host (strace can only follow the server).
tool=
start_tool() {
	tool=
	case $1 in
	baseline) ;;
	empty-tp) "$work/emptytp" 2>/dev/null & ;; # two programs that do nothing on sys_enter and sys_exit: the floor of any tool there
	sysray-floor) $sysray stat -e sync -o "$work/floor.txt" >/dev/null 2>&1 & ;; # programs attached, every syscall filtered out at entry
	sysray-stat) $sysray stat -o "$work/stat.txt" >/dev/null 2>&1 & ;;
	sysray-stat-exact) $sysray stat --exact-timing -o "$work/stat.txt" >/dev/null 2>&1 & ;; # every call timed by the clock
	sysray-record) $sysray record -w "$work/r.sysray" >/dev/null 2>"$work/record.err" & ;;
	sysray-doctor) $sysray doctor -o "$work/doctor.txt" >/dev/null 2>&1 & ;;
	prev-doctor) "$PREV/sysray" doctor -o "$work/doctor.txt" >/dev/null 2>&1 & ;;
	sysray-agent) $sysray agent --listen 127.0.0.1:0 --capture-dir "$work/caps" >/dev/null 2>&1 & ;; # the defaults: duty cycling, doctor, flight recorder
	sysray-agent-exact) $sysray agent --listen 127.0.0.1:0 --capture-dir "$work/caps" --exact-timing >/dev/null 2>&1 & ;; # the defaults, every call timed by the clock while attached
	sysray-agent-always) $sysray agent --listen 127.0.0.1:0 --capture-dir "$work/caps" --syscalls always >/dev/null 2>&1 & ;;
	sysray-agent-counts) $sysray agent --listen 127.0.0.1:0 --no-doctor >/dev/null 2>&1 & ;; # duty-cycled counts only: what the doctor adds is the difference
	sysray-agent-1s) $sysray agent --listen 127.0.0.1:0 --capture-dir "$work/caps" --duty-on 1s >/dev/null 2>&1 & ;; # attached twice as long as the default: 1 s in 10 s
	# bench/ablate.sh's builds, each without one part (ABLATE is their directory)
	ablate-noclock) "$ABLATE/sysray-noclock" record -w "$work/r.sysray" >/dev/null 2>&1 & ;;
	ablate-discard) SYSRAY_ABLATE_DISCARD=1 "$ABLATE/sysray-plain" record -w "$work/r.sysray" >/dev/null 2>&1 & ;;
	ablate-noclock-discard) SYSRAY_ABLATE_DISCARD=1 "$ABLATE/sysray-noclock" record -w "$work/r.sysray" >/dev/null 2>&1 & ;;
	ablate-percpu) "$ABLATE/sysray-percpu" stat -o "$work/stat.txt" >/dev/null 2>&1 & ;;
	prev-stat) "$PREV/sysray" stat -o "$work/stat.txt" >/dev/null 2>&1 & ;; # PREV: a directory with another build of sysray (an earlier commit), for an A/B in one run
	prev-record) "$PREV/sysray" record -w "$work/r.sysray" >/dev/null 2>&1 & ;;
	prev-agent) "$PREV/sysray" agent --listen 127.0.0.1:0 --capture-dir "$work/caps" >/dev/null 2>&1 & ;; # another build's agent at its defaults
	bpftrace-hist) bpftrace -q -e 'tracepoint:raw_syscalls:sys_enter { @s[tid] = nsecs; } tracepoint:raw_syscalls:sys_exit /@s[tid]/ { @[args->id] = hist(nsecs - @s[tid]); delete(@s[tid]); }' >/dev/null 2>&1 & ;;
	perf-trace) perf trace -s -a -o "$work/pt.txt" >/dev/null 2>&1 & ;;
	strace-server) strace -f -c -o "$work/st.txt" -p "$rpid" >/dev/null 2>&1 & ;;
	esac
	[ "$1" = baseline ] || tool=$!
	case $1 in
	sysray-agent* | prev-agent) sleep 5 ;; # the container table waits up to 2 s before the probe loads
	*) sleep 2 ;;
	esac
}

stop_tool() {
	[ "$1" = baseline ] && return
	kill -INT $tool 2>/dev/null || true
	wait $tool 2>/dev/null || true
}

order=(baseline empty-tp sysray-floor sysray-stat sysray-stat-exact sysray-record sysray-agent sysray-agent-1s sysray-agent-exact sysray-agent-counts sysray-agent-always bpftrace-hist perf-trace strace-server)
# ONLY="baseline sysray-agent bpftrace-hist" runs a subset, in that order.
[ -n "${ONLY:-}" ] && read -r -a order <<<"$ONLY"
# paired: each sample's change against the baseline run last before it.
# The host drifts by several percent within minutes; a change of 2% shows
# in the pairs before it shows in the medians. List baseline more than
# once in ONLY to pair each tool with a baseline of its own.
declare -A samples paired kernel
last_base=
for ((r = 1; r <= ROUNDS; r++)); do
	for m in "${order[@]}"; do
		start_tool "$m"
		[ "${BPF_STATS:-}" = 1 ] && k0=$(bpf_ns)
		x=$(bench || echo NaN)
		if [ "${BPF_STATS:-}" = 1 ]; then
			k1=$(bpf_ns)
			kernel[$m]+="$(awk -v a="$k0" -v b="$k1" -v n="$REQS" 'BEGIN{printf "%.0f", (b-a)/n}') "
		fi
		samples[$m]+="$x "
		[ "$m" = baseline ] && last_base=$x
		if [ "$m" != baseline ] && [ -n "$last_base" ]; then
			paired[$m]+="$(awk -v x="$x" -v b="$last_base" 'BEGIN{printf "%.1f", 100*(x-b)/b}') "
		fi
		stop_tool "$m"
		if [ "$m" = sysray-record ] && grep -q "lost" "$work/record.err"; then
			echo "bench: sysray record dropped events: $(grep -m1 'were lost' "$work/record.err")" >&2
		fi
	done
done

# Without a baseline in ONLY the changes are against nothing: shown as nan.
base=$(echo "${samples[baseline]:-nan}" | median)
echo "## redis GET throughput, $REQS requests x $ROUNDS rounds, 50 clients, loopback, whole host traced; medians"
echo
echo "kernel $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%d)"
echo
echo "| tool | requests/s | change | paired change | samples |"
echo "|---|---:|---:|---:|---|"
declare -A shown
for m in "${order[@]}"; do
	[ -n "${shown[$m]:-}" ] && continue
	shown[$m]=1
	med=$(echo "${samples[$m]}" | median)
	pmed=
	[ -n "${paired[$m]:-}" ] && pmed=$(echo "${paired[$m]}" | median)
	awk -v m="$m" -v med="$med" -v base="$base" -v p="$pmed" -v s="${samples[$m]}" \
		'BEGIN{printf "| %s | %.0f | %+.1f%% | %s | %s|\n", m, med, 100*(med-base)/base, (p == "" ? "" : sprintf("%+.1f%%", p)), s}'
done
echo
echo "paired change: the median of each sample's change against the baseline run just before it."
if [ "${BPF_STATS:-}" = 1 ]; then
	echo
	echo "| tool | BPF program ns per GET (median) | samples |"
	echo "|---|---:|---|"
	declare -A kshown
	for m in "${order[@]}"; do
		[ -n "${kshown[$m]:-}" ] && continue
		kshown[$m]=1
		echo "| $m | $(echo "${kernel[$m]}" | median) | ${kernel[$m]}|"
	done
	echo
	echo "BPF program ns per GET: the run time the kernel accounted to every loaded BPF program during the run (kernel.bpf_stats_enabled), over the requests; the stats' own clock reads are in it."
fi
