#!/usr/bin/env bash
# Undoes tests/containers/setup.sh: removes the containers it started (those
# labelled io.sysray.test=1, in every containerd namespace), its image, and
# stops containerd if setup.sh started it. Installed packages stay.
# Idempotent; needs root.
#
#   teardown.sh          all of the above
#   teardown.sh NAME...  only remove those containers (in $SYSRAY_CTR_NS,
#                        default "default")
set -euo pipefail

STATE=${SYSRAY_CTR_STATE:-/var/lib/sysray-tests/containers}
SOCK=${SYSRAY_CONTAINERD_SOCK:-/run/containerd/containerd.sock}
NS=${SYSRAY_CTR_NS:-default}
IMAGE=$(bash "$(dirname "$0")/setup.sh" image)

ctr_() { ctr --address "$SOCK" -n "$NS" "$@"; }

[ "$(id -u)" = 0 ] || { echo "teardown.sh: must run as root" >&2; exit 1; }
command -v ctr >/dev/null || exit 0
timeout 5 ctr --address "$SOCK" version >/dev/null 2>&1 || {
	rm -f "$STATE/containerd.pid"
	exit 0
}

remove_container() {
	local name=$1
	ctr_ tasks kill -s SIGKILL "$name" >/dev/null 2>&1 || true
	for _ in $(seq 1 50); do
		ctr_ tasks rm -f "$name" >/dev/null 2>&1 && break
		ctr_ tasks ls -q 2>/dev/null | grep -qx "$name" || break
		sleep 0.1
	done
	ctr_ containers rm "$name" >/dev/null 2>&1 || true
}

if [ $# -gt 0 ]; then
	for n in "$@"; do remove_container "$n"; done
	exit 0
fi

for NS in $(ctr --address "$SOCK" namespaces ls -q 2>/dev/null); do
	for n in $(ctr_ containers ls -q "labels.\"io.sysray.test\"==1" 2>/dev/null); do
		remove_container "$n"
	done
	ctr_ images rm "$IMAGE" >/dev/null 2>&1 || true
done
rm -f "$STATE"/imported.*

if [ -f "$STATE/containerd.pid" ]; then
	pid=$(cat "$STATE/containerd.pid")
	# Only the containerd that setup.sh started, by its pid.
	if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = containerd ]; then
		kill "$pid"
		for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	fi
	rm -f "$STATE/containerd.pid"
fi
