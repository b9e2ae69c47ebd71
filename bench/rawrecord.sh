#!/usr/bin/env bash
# What record's own CPU would be if it wrote the ring's records as read,
# compressed by S2, and left merging, decoding and encoding to whoever reads
# the capture (one way to reach the 150 ns an event that record's goal
# asks). Builds this checkout with bench/rawrecord.patch applied, whose
# record, when $SYSRAY_RAWRECORD names a file, hands each batch of ring
# records to that file instead of the merger; then bench/recordcpu.sh runs
# it against this checkout's record, interleaved. The patched build is not
# a tool: its file cannot be read back.
#
#   bash bench/rawrecord.sh [ROUNDS] [REQUESTS]
#
# Needs root and what bench/recordcpu.sh needs; no clang (the patch is Go).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-4}
REQS=${2:-300000}
dir=$(mktemp -d)
trap 'git worktree remove --force "$dir/src" 2>/dev/null; rm -rf "$dir"' EXIT
git worktree add -q --detach "$dir/src" HEAD
git -C "$dir/src" apply "$PWD/bench/rawrecord.patch"
(cd "$dir/src" && CGO_ENABLED=0 go build -o "$dir/raw/sysray" ./cmd/sysray)
make -s build
SYSRAY_RAWRECORD=$dir/raw.s2 bash bench/recordcpu.sh "$ROUNDS" "$REQS" bin/sysray "$dir/raw/sysray"
