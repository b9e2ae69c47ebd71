#!/usr/bin/env bash
# How long each command takes to load, attach and end on `true`: almost
# all of it is the kernel's verifier walking sysray's programs, paid at
# every start, and a `-p` or whole-host trace misses whatever happens
# meanwhile. Interleaved round by round; medians in seconds. PREV=DIR adds
# another build (DIR/sysray) in the same rounds.
#
#   bash bench/startup.sh [ROUNDS]
#
# Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${1:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
make -s build
builds=(./bin/sysray)
[ -n "${PREV:-}" ] && builds+=("$PREV/sysray")
for ((r = 1; r <= ROUNDS; r++)); do
	for mode in doctor stat record; do
		args=("$mode")
		[ "$mode" = record ] && args+=(-w "$work/c.sysray")
		for b in "${builds[@]}"; do
			s=$(date +%s%N)
			"$b" "${args[@]}" -- true >/dev/null 2>&1
			e=$(date +%s%N)
			name=this
			[ "$b" = ./bin/sysray ] || name=prev
			echo "$name-$mode $(((e - s) / 1000000))"
		done
	done
done >"$work/runs"
echo "| build-command | median s | runs (ms) |"
echo "|---|---:|---|"
for k in $(cut -d' ' -f1 "$work/runs" | sort -u); do
	runs=$(awk -v k="$k" '$1 == k { printf " %s", $2 }' "$work/runs")
	printf '| %s | %.2f |%s |\n' "$k" "$(echo "$runs" | median | awk '{ print $1 / 1000 }')" "$runs"
done
