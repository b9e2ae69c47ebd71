#!/usr/bin/env bash
# What the doctor costs against stat on a tight getppid loop, head to head:
# baseline, stat, doctor and doctor --stacks=false (no sleep tracking) run
# interleaved, and each round's difference is taken before the median, so
# drift cancels. PREV=DIR adds the doctor of another build (DIR/sysray) in
# the same rounds.
#
#   bash bench/doctor-vs-stat.sh [ROUNDS] [CALLS]
#
# Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${1:-11}
CALLS=${2:-2000000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -static -o "$work/loop" bench/getppid_loop.c
make -s build
s=$PWD/bin/sysray
ns() { "$@" 2>/dev/null | grep -E '^[0-9.]+$' | tail -1; }
: >"$work/rows"
for ((r = 1; r <= ROUNDS; r++)); do
	row="$(ns "$work/loop" "$CALLS") $(ns "$s" stat -o "$work/out" -- "$work/loop" "$CALLS")"
	row+=" $(ns "$s" doctor -o "$work/out" -- "$work/loop" "$CALLS")"
	row+=" $(ns "$s" doctor --stacks=false -o "$work/out" -- "$work/loop" "$CALLS")"
	[ -n "${PREV:-}" ] && row+=" $(ns "$PREV/sysray" doctor -o "$work/out" -- "$work/loop" "$CALLS")"
	echo "$row" >>"$work/rows"
done
echo "## doctor against stat: getppid loop, $CALLS calls, $ROUNDS rounds, medians of per-round differences"
echo
echo "| mode | added ns/call | over stat |"
echo "|---|---:|---:|"
cols="2:stat 3:doctor 4:doctor--stacks=false"
[ -n "${PREV:-}" ] && cols+=" 5:prev-doctor"
for col in $cols; do
	i=${col%%:*} name=${col#*:}
	added=$(awk -v i="$i" '{print $i - $1}' "$work/rows" | median)
	over=$(awk -v i="$i" '{print $i - $2}' "$work/rows" | median)
	printf '| %s | %+.0f | %+.0f |\n' "$name" "$added" "$over"
done
echo
echo "Rounds (ns/call: baseline, stat, doctor, doctor --stacks=false${PREV:+, prev doctor}):"
sed 's/^/    /' "$work/rows"
