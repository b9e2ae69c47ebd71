#!/usr/bin/env bash
# Where record's and stat's cost on redis goes, by taking parts away.
#
#   bash bench/ablate.sh [ROUNDS] [REQUESTS]
#
# Builds commit ABLATE_BASE (default 1e593f7, the last before the fast
# path of bpf/fast.h, which the patch was made against) four times from a
# scratch worktree with bench/ablate.patch applied, whole and each without
# one part, and runs them in bench/redis.sh, each paired with a baseline:
#
#   ablate-noclock         record that never reads the clock (every call
#                          stamped 1 ns): the price of record's two clock
#                          reads a call
#   ablate-discard         record whose reader drops each ring sample
#                          unread: the price of decoding, merging,
#                          encoding and compressing
#   ablate-noclock-discard both: what is left is the BPF side's task
#                          storage lookups, its emission and the ring
#   ablate-percpu          stat's programs replaced by the least a per-CPU
#                          design could do (an entry slot and a count per
#                          CPU, no task storage, no clock, no key by
#                          process): a floor for any redesign of stat's path
#
# The ablated builds are not tools: their output is wrong by design. The
# patch is against bpf/syscalls.h and internal/probe/run.go of
# ABLATE_BASE; to price the parts of a later commit, make it again there
# from the ABLATE_* blocks it adds. Needs root and clang (clang-19), and
# what bench/redis.sh needs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
REQS=${2:-500000}

clang=$(command -v clang-19 || command -v clang || true)
if [ -z "$clang" ]; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-19 llvm-19 >/dev/null
	clang=clang-19
fi

ABLATE=$(mktemp -d)
wt=$ABLATE/src
trap 'git worktree remove --force "$wt" 2>/dev/null; rm -rf "$ABLATE"' EXIT
git worktree add -q --detach "$wt" "${ABLATE_BASE:-1e593f7}"
git -C "$wt" apply "$PWD/bench/ablate.patch"
build() { # name cflags
	(cd "$wt/internal/probe" && BPF_CLANG=$clang BPF_CFLAGS="-O2 -g -Wall -Werror -mcpu=v3 $2" go generate ./... >/dev/null)
	(cd "$wt" && CGO_ENABLED=0 go build -o "$ABLATE/sysray-$1" ./cmd/sysray)
}
build plain ""
mv "$ABLATE/sysray-plain" "$ABLATE/sysray" # the whole build, as prev-stat and prev-record run it
build noclock -DABLATE_NOCLOCK
build percpu -DABLATE_PERCPU
export ABLATE PREV=$ABLATE

ONLY="baseline empty-tp baseline prev-stat baseline ablate-percpu baseline prev-record baseline ablate-discard baseline ablate-noclock baseline ablate-noclock-discard" \
	bash bench/redis.sh "$ROUNDS" "$REQS"
