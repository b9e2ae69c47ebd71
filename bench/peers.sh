#!/usr/bin/env bash
# sysray against its peers on their own ground: nanoseconds added per
# syscall by each tracer, on a tight getppid loop, in one run. Modes are
# interleaved round by round so that drift in a noisy machine (±50% from
# hour to hour here) hits all of them alike; the table gives medians, and
# the ratios under it are the headline, against these goals:
#   stat / bpftrace bare counter <= 0.8, stat / sysray floor <= 2.5,
#   record / perf record <= 0.25.
#
#   bash bench/peers.sh [ROUNDS] [CALLS]
#
# Needs root. Installs strace, linux-perf and bpftrace when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${1:-5}
CALLS=${2:-2000000}
SLOW_CALLS=$((CALLS / 20)) # strace and perf trace take ~100x longer per call

need=()
command -v strace >/dev/null || need+=(strace)
command -v perf >/dev/null || need+=(linux-perf)
command -v bpftrace >/dev/null || need+=(bpftrace)
command -v bpftool >/dev/null || need+=(bpftool)
if [ ${#need[@]} -gt 0 ]; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
# perf trace and bpftrace's tracepoints want tracefs; mount it if it is not.
if ! mountpoint -q /sys/kernel/tracing; then
	mount -t tracefs tracefs /sys/kernel/tracing && echo "bench: mounted tracefs at /sys/kernel/tracing" >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -static -o "$work/loop" bench/getppid_loop.c
make -s build
sysray=$PWD/bin/sysray
loop=$work/loop
CGO_ENABLED=0 go build -o "$work/emptytp" ./bench/emptytp

declare -A cmds=(
	[baseline]="$loop $CALLS"
	# Two programs that do nothing on sys_enter and sys_exit: what having the
	# tracepoints on costs any tool that attaches there (the VM's phase moves
	# it). No figure if they did not attach: the bare loop would pass for it.
	[empty-tp]="$work/emptytp & p=\$!; sleep 0.3; kill -0 \$p || exit 1; $loop $CALLS; kill -INT \$p; wait \$p"
	[sysray-record]="$sysray record -w $work/s.sysray -- $loop $CALLS"
	[sysray-floor]="$sysray stat -e sync -o $work/floor.txt -- $loop $CALLS"
	[sysray-stat]="$sysray stat -o $work/stat.txt -- $loop $CALLS"
	[sysray-stat-exact]="$sysray stat --exact-timing -o $work/stat2.txt -- $loop $CALLS"
	[sysray-doctor]="$sysray doctor -o $work/doctor.txt -- $loop $CALLS"
	# PREV: a directory with another build of sysray (an earlier commit), for an A/B in one run
	[prev-doctor]="${PREV:-/nonexistent}/sysray doctor -o $work/doctor2.txt -- $loop $CALLS"
	[prev-floor]="${PREV:-/nonexistent}/sysray stat -e sync -o $work/floor2.txt -- $loop $CALLS"
	[prev-stat]="${PREV:-/nonexistent}/sysray stat -o $work/stat3.txt -- $loop $CALLS"
	[prev-record]="${PREV:-/nonexistent}/sysray record -w $work/s3.sysray -- $loop $CALLS"
	[sysray-record-stacks]="$sysray record --stacks -w $work/s2.sysray -- $loop $CALLS"
	[perf-record]="perf record -q -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit -o $work/perf.data -- $loop $CALLS"
	[bpftrace-count]="bpftrace -q -e 'tracepoint:raw_syscalls:sys_enter { @[args->id] = count(); }' -c '$loop $CALLS'"
	[bpftrace-hist]="bpftrace -q -e 'tracepoint:raw_syscalls:sys_enter /pid == cpid/ { @s[tid] = nsecs; } tracepoint:raw_syscalls:sys_exit /@s[tid]/ { @[args->id] = hist(nsecs - @s[tid]); delete(@s[tid]); }' -c '$loop $CALLS'"
	[perf-trace-s]="perf trace -s -o $work/ptrace.txt -- $loop $SLOW_CALLS"
	[strace-c]="strace -f -c -o $work/strace.txt $loop $SLOW_CALLS"
	[strace-o]="strace -f -o $work/strace.out $loop $SLOW_CALLS"
)
# MODES="baseline sysray-stat" picks some modes (and skips the sampling part).
default_order=(baseline empty-tp sysray-floor sysray-stat sysray-stat-exact sysray-doctor sysray-record sysray-record-stacks perf-record bpftrace-count bpftrace-hist perf-trace-s strace-c strace-o)
read -r -a order <<<"${MODES:-${default_order[*]}}"

declare -A samples
for ((r = 1; r <= ROUNDS; r++)); do
	for m in "${order[@]}"; do
		# The loop prints its ns/call as the last number on stdout.
		out=$(bash -c "${cmds[$m]}" 2>"$work/$m.err" | grep -E '^[0-9.]+$' | tail -1 || true)
		if [ -z "$out" ]; then
			echo "bench: $m failed: $(tail -3 "$work/$m.err")" >&2
			out=NaN
		fi
		samples[$m]+="$out "
		if [ "$m" = sysray-record ]; then
			grep -q "were lost" "$work/$m.err" && echo "bench: sysray dropped events: $(grep 'were lost' "$work/$m.err")" >&2
			events=$(grep -oE 'wrote [0-9]+' "$work/$m.err" | grep -oE '[0-9]+')
			samples[sysray-bytes]+="$(awk -v s="$(stat -c %s "$work/s.sysray")" -v n="$events" 'BEGIN{printf "%.2f", s/n}') "
		fi
		if [ "$m" = perf-record ]; then
			samples[perf-bytes]+="$(awk -v s="$(stat -c %s "$work/perf.data")" -v n="$((CALLS * 2))" 'BEGIN{printf "%.2f", s/(n/2)}') "
		fi
	done
done

base=$(echo "${samples[baseline]}" | median)
echo "## getppid loop: $CALLS calls ($SLOW_CALLS for strace and perf trace), $ROUNDS rounds, medians"
echo
echo "kernel $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%d)"
echo
echo "| tool | ns/call | added ns/call | ratio to baseline | samples |"
echo "|---|---:|---:|---:|---|"
for m in "${order[@]}"; do
	med=$(echo "${samples[$m]}" | median)
	awk -v m="$m" -v med="$med" -v base="$base" -v s="${samples[$m]}" 'BEGIN{printf "| %s | %.0f | %+.0f | %.1fx | %s|\n", m, med, med-base, med/base, s}'
done
added() { awk -v a="$(echo "${samples[$1]:-}" | median)" -v b="$base" 'BEGIN{printf "%.1f", a-b}'; }
ratio() { # ratio NAME A B GOAL: A's added ns over B's, against a goal
	[ -n "${samples[$2]:-}" ] && [ -n "${samples[$3]:-}" ] || return 0
	awk -v n="$1" -v a="$(added "$2")" -v b="$(added "$3")" -v g="$4" \
		'BEGIN{r=a/b; printf "| %s | %+.0f / %+.0f | %.2f | <= %s | %s |\n", n, a, b, r, g, (r<=g)?"met":"missed"}'
}
echo
echo "| ratio of added ns | this run | ratio | goal | |"
echo "|---|---:|---:|---:|---|"
ratio "stat / bpftrace bare counter" sysray-stat bpftrace-count 0.8
ratio "stat / sysray floor" sysray-stat sysray-floor 2.5
ratio "record / perf record" sysray-record perf-record 0.25
echo
echo "Capture size per syscall: sysray $(echo "${samples[sysray-bytes]:-}" | median) bytes (one event per syscall);" \
	"perf.data $(echo "${samples[perf-bytes]:-}" | median) bytes (enter+exit records)."

[ -n "${MODES:-}" ] && exit 0

# CPU-bound throughput under sampling: the cost of `sysray profile` at 99 Hz.
gcc -O2 -static -o "$work/spin" bench/spin.c
declare -A spin
for ((r = 1; r <= ROUNDS; r++)); do
	spin[baseline]+="$("$work/spin" 3) "
	spin[sysray-profile]+="$($sysray profile -o "$work/p.folded" -- "$work/spin" 3 2>/dev/null | head -1 || true) "
	spin[perf-record-99hz]+="$(perf record -q -F 99 -g -o "$work/perf2.data" -- "$work/spin" 3 2>/dev/null | tail -1 || true) "
done
sbase=$(echo "${spin[baseline]}" | median)
echo
echo "## CPU-bound spin for 3 s: million iterations/s, $ROUNDS rounds, medians"
echo
echo "| tool | Mit/s | throughput lost | samples |"
echo "|---|---:|---:|---|"
for m in baseline sysray-profile perf-record-99hz; do
	med=$(echo "${spin[$m]}" | median)
	awk -v m="$m" -v med="$med" -v base="$sbase" -v s="${spin[$m]}" 'BEGIN{printf "| %s | %.1f | %.2f%% | %s|\n", m, med, 100*(base-med)/base, s}'
done

# The sampler's own cost, free of the noise above: the kernel's run time of
# sysray's sampling program per sample (bpf_stats), times the sample rate.
sysctl -qw kernel.bpf_stats_enabled=1
$sysray profile -o "$work/p2.folded" -- "$work/spin" 3 >/dev/null 2>&1 &
sleep 2
stats=$(bpftool prog show name on_cpu 2>/dev/null | grep -oE 'run_time_ns [0-9]+ run_cnt [0-9]+' || true)
wait
sysctl -qw kernel.bpf_stats_enabled=0
if [ -n "$stats" ]; then
	echo
	echo "$stats" | awk '{printf "sysray profile, in-kernel cost per sample: %.0f ns (%d samples); at 99 Hz that is %.4f%% of a CPU\n", $2/$4, $4, 100*99*($2/$4)/1e9}'
fi
