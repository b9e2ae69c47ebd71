#!/usr/bin/env bash
# Sets up a real containerd for sysray's container tests, and runs containers
# in it. Idempotent; needs root; pulls nothing from a registry.
#
#   setup.sh            install containerd + runc + busybox-static from Debian
#                       if missing, start containerd if it is not running
#                       (in the background, logging to $STATE/containerd.log;
#                       no systemd needed) and import a tiny local OCI image
#                       built from busybox-static (plus the host's glibc, so
#                       sysray's libc probe has something to find).
#   setup.sh run [OPTION...] NAME POD NAMESPACE CONTAINER -- CMD [ARG...]
#                       (re)start container NAME with Kubernetes-style labels
#                       io.kubernetes.pod.name=POD,
#                       io.kubernetes.pod.namespace=NAMESPACE,
#                       io.kubernetes.container.name=CONTAINER, and print the
#                       host pid of its init process. The containerd
#                       namespace is $SYSRAY_CTR_NS (default "default"); the
#                       cgroup path is containerd's default /<ns>/<NAME>
#                       unless $SYSRAY_CTR_CGROUP gives one (e.g. a kubelet
#                       style /kubepods/besteffort/pod<uid>/<id>).
#                       Options: --mount SRC:DST[:ro] bind-mounts a host
#                       directory (repeatable), --read-only makes the
#                       container's root filesystem read-only, --privileged
#                       gives it every capability and no seccomp filter (its
#                       namespaces stay its own).
#   setup.sh image      print the image reference.
#
# teardown.sh undoes what this script did (except installing packages).
set -euo pipefail

STATE=${SYSRAY_CTR_STATE:-/var/lib/sysray-tests/containers}
SOCK=${SYSRAY_CONTAINERD_SOCK:-/run/containerd/containerd.sock}
NS=${SYSRAY_CTR_NS:-default}
IMAGE=docker.io/sysray/busybox:test
# Bump when the image's contents change, so an old import is replaced.
IMAGE_REV=2
TEST_LABEL=io.sysray.test

log() { echo "setup.sh: $*" >&2; }
die() { log "$*"; exit 1; }
ctr_() { ctr --address "$SOCK" -n "$NS" "$@"; }

[ "$(id -u)" = 0 ] || die "must run as root"

install_packages() {
	local need=()
	command -v containerd >/dev/null && command -v ctr >/dev/null || need+=(containerd)
	command -v runc >/dev/null || need+=(runc)
	dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
	[ ${#need[@]} -eq 0 ] && return
	log "installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# The package's postinst may try systemd; that is harmless without it.
	apt-get install -y -qq "${need[@]}" >/dev/null
}

containerd_up() { timeout 5 ctr --address "$SOCK" version >/dev/null 2>&1; }

start_containerd() {
	containerd_up && return
	mkdir -p "$STATE"
	log "starting containerd (log: $STATE/containerd.log)"
	# Detached from our stdio and session: a caller that waits for our output
	# (go test's exec) must not wait for containerd too.
	setsid containerd --address "$SOCK" </dev/null >>"$STATE/containerd.log" 2>&1 9>&- &
	echo $! >"$STATE/containerd.pid"
	for _ in $(seq 1 100); do
		containerd_up && return
		kill -0 "$(cat "$STATE/containerd.pid")" 2>/dev/null ||
			die "containerd exited; see $STATE/containerd.log: $(tail -5 "$STATE/containerd.log")"
		sleep 0.2
	done
	die "containerd did not answer on $SOCK within 20s"
}

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

# Writes blob $1 into the layout under its digest; prints "digest size".
put_blob() {
	local d
	d=$(sha "$1")
	mv "$1" "$OCI/blobs/sha256/$d"
	echo "$d $(size "$OCI/blobs/sha256/$d")"
}

# Builds the OCI image tarball $STATE/image.tar (once per IMAGE_REV).
build_image() {
	if [ -f "$STATE/image.tar" ] && [ "$(cat "$STATE/image.rev" 2>/dev/null)" = "$IMAGE_REV" ]; then
		return
	fi
	log "building $IMAGE from busybox-static"
	local work=$STATE/build
	rm -rf "$work"
	mkdir -p "$work/rootfs"/{bin,etc,tmp,proc,sys,dev,root} "$work/oci/blobs/sha256"
	OCI=$work/oci
	local root=$work/rootfs
	cp /bin/busybox "$root/bin/busybox"
	local a
	for a in $(/bin/busybox --list); do
		[ "$a" = busybox ] || ln -sf busybox "$root/bin/$a"
	done
	echo sysray-test >"$root/etc/hostname"
	echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
	echo 'root:x:0:' >"$root/etc/group"
	# The host's C library, so that sysray's libc probe finds a real one
	# inside the container's root (busybox itself is static).
	local libdir
	libdir=$(dirname "$(readlink -f /lib64/ld-linux-x86-64.so.2 2>/dev/null || readlink -f /lib/ld-linux-aarch64.so.1)")
	mkdir -p "$root$libdir"
	cp "$libdir"/libc.so.6 "$root$libdir/"
	cp "$(readlink -f "$libdir"/ld-linux-*.so.*)" "$root$libdir/" 2>/dev/null || true

	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
		-C "$root" -cf "$work/layer.tar" .
	local ldig lsize
	read -r ldig lsize <<<"$(put_blob "$work/layer.tar")"

	local arch
	arch=$(dpkg --print-architecture)
	cat >"$work/config.json" <<-EOF
	{"architecture":"$arch","os":"linux","config":{"Env":["PATH=/bin"],"Cmd":["sh"],"WorkingDir":"/","Labels":{"org.opencontainers.image.title":"sysray-busybox","$TEST_LABEL":"1"}},"rootfs":{"type":"layers","diff_ids":["sha256:$ldig"]},"history":[{"created_by":"sysray tests/containers/setup.sh","comment":"busybox-static rootfs"}]}
	EOF
	local cdig csize
	read -r cdig csize <<<"$(put_blob "$work/config.json")"

	cat >"$work/manifest.json" <<-EOF
	{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:$cdig","size":$csize},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:$ldig","size":$lsize}]}
	EOF
	local mdig msize
	read -r mdig msize <<<"$(put_blob "$work/manifest.json")"

	cat >"$OCI/index.json" <<-EOF
	{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:$mdig","size":$msize,"platform":{"architecture":"$arch","os":"linux"},"annotations":{"io.containerd.image.name":"$IMAGE","org.opencontainers.image.ref.name":"test"}}]}
	EOF
	echo '{"imageLayoutVersion":"1.0.0"}' >"$OCI/oci-layout"
	tar -C "$OCI" -cf "$STATE/image.tar" oci-layout index.json blobs
	rm -rf "$work"
	echo "$IMAGE_REV" >"$STATE/image.rev"
	rm -f "$STATE"/imported.*
}

# Imports the image into containerd namespace $NS, unless it is there.
import_image() {
	local mark=$STATE/imported.$NS
	if [ -f "$mark" ] && ctr_ images ls -q "name==$IMAGE" 2>/dev/null | grep -qx "$IMAGE"; then
		return
	fi
	ctr_ images rm "$IMAGE" >/dev/null 2>&1 || true
	ctr_ images import "$STATE/image.tar" >&2
	ctr_ images ls -q "name==$IMAGE" | grep -qx "$IMAGE" || die "import of $IMAGE did not register the image"
	touch "$mark"
}

# Removes container $1 (task and all), if it exists.
remove_container() {
	local name=$1
	ctr_ containers info "$name" >/dev/null 2>&1 || return 0
	ctr_ tasks kill -s SIGKILL "$name" >/dev/null 2>&1 || true
	for _ in $(seq 1 50); do
		ctr_ tasks rm -f "$name" >/dev/null 2>&1 && break
		ctr_ tasks ls -q 2>/dev/null | grep -qx "$name" || break
		sleep 0.1
	done
	ctr_ containers rm "$name" >/dev/null 2>&1 || true
}

task_pid() {
	ctr_ tasks ls 2>/dev/null | awk -v n="$1" '$1==n && $3=="RUNNING"{print $2}'
}

run_container() {
	local opts=() src dst ro
	while [ $# -gt 0 ]; do
		case $1 in
		--mount)
			[ $# -ge 2 ] || die "--mount needs SRC:DST[:ro]"
			IFS=: read -r src dst ro <<<"$2"
			[ -n "$src" ] && [ -n "$dst" ] || die "--mount $2: want SRC:DST[:ro]"
			opts+=(--mount "type=bind,src=$src,dst=$dst,options=rbind:${ro:-rw}")
			shift 2
			;;
		--read-only | --privileged)
			opts+=("$1")
			shift
			;;
		*) break ;;
		esac
	done
	[ $# -ge 6 ] && [ "$5" = -- ] || die "usage: setup.sh run [--mount SRC:DST[:ro]] [--read-only] [--privileged] NAME POD NAMESPACE CONTAINER -- CMD [ARG...]"
	local name=$1 pod=$2 podns=$3 cname=$4
	shift 5
	remove_container "$name"
	# ctr run -d returns once the task is started; containerd's shim keeps it.
	local cg=()
	[ -n "${SYSRAY_CTR_CGROUP:-}" ] && cg=(--cgroup "$SYSRAY_CTR_CGROUP")
	ctr_ run -d "${cg[@]}" "${opts[@]}" \
		--label "io.kubernetes.pod.name=$pod" \
		--label "io.kubernetes.pod.namespace=$podns" \
		--label "io.kubernetes.container.name=$cname" \
		--label "$TEST_LABEL=1" \
		"$IMAGE" "$name" "$@" </dev/null >/dev/null
	local pid=""
	for _ in $(seq 1 50); do
		pid=$(task_pid "$name")
		[ -n "$pid" ] && break
		sleep 0.1
	done
	[ -n "$pid" ] || die "container $name has no running task"
	echo "$pid"
}

# One setup at a time: tests that start containers run alongside each other,
# and two of them must not both start containerd or import the image.
setup() {
	mkdir -p "$STATE"
	exec 9>>"$STATE/setup.lock"
	flock 9
	install_packages
	start_containerd
	build_image
	import_image
	exec 9>&-
}

case "${1:-setup}" in
setup) setup ;;
run)
	shift
	setup
	run_container "$@"
	;;
image) echo "$IMAGE" ;;
*) die "unknown command $1" ;;
esac
