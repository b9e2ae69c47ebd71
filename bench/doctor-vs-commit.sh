#!/usr/bin/env bash
# What a change costs the doctor on a tight getppid loop: the doctor built
# from another commit (default: HEAD~1) against this tree's, interleaved
# round by round, medians of the per-round differences, so drift cancels.
#
#   bash bench/doctor-vs-commit.sh [COMMIT] [ROUNDS] [CALLS]
#
# Needs root and git.
set -euo pipefail
cd "$(dirname "$0")/.."
COMMIT=${1:-HEAD~1}
ROUNDS=${2:-15}
CALLS=${3:-2000000}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/old" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add -f --detach "$work/old" "$COMMIT" >/dev/null 2>&1
(cd "$work/old" && CGO_ENABLED=0 go build -trimpath -o "$work/sysray-old" ./cmd/sysray)
make -s build
gcc -O2 -static -o "$work/loop" bench/getppid_loop.c
ns() { "$@" 2>/dev/null | grep -E '^[0-9.]+$' | tail -1; }
# The two run in turn, first one then the other: whichever runs second in
# a round measured ~15 ns slower when both were the same commit.
for ((r = 1; r <= ROUNDS; r++)); do
	base=$(ns "$work/loop" "$CALLS")
	if ((r % 2)); then
		old=$(ns "$work/sysray-old" doctor -o "$work/out" -- "$work/loop" "$CALLS")
		new=$(ns ./bin/sysray doctor -o "$work/out" -- "$work/loop" "$CALLS")
	else
		new=$(ns ./bin/sysray doctor -o "$work/out" -- "$work/loop" "$CALLS")
		old=$(ns "$work/sysray-old" doctor -o "$work/out" -- "$work/loop" "$CALLS")
	fi
	echo "$base $old $new"
done | awk -v c="$COMMIT" -v n="$ROUNDS" '
	{ base[NR] = $1; old[NR] = $2 - $1; new[NR] = $3 - $1; d[NR] = $3 - $2 }
	function median(a, k,   i, j, t) {
		for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
	}
	END {
		printf "doctor on a getppid loop, %d rounds, medians: baseline %.0f ns; %s +%.0f; this tree +%.0f; difference %+.0f ns/call\n",
			n, median(base, NR), c, median(old, NR), median(new, NR), median(d, NR)
	}'
