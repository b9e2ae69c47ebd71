// Package container names the container, Kubernetes pod or systemd service
// behind a cgroup, so that sysray can say "pod shop/web-0, container app"
// instead of "cgroup 4312".
//
// It has three parts:
//
//   - Parsing (Parse, ParseCgroupFile, Parser): a cgroup path, as it appears
//     in /proc/PID/cgroup for cgroup v1 ("N:controllers:/path") or v2
//     ("0::/path"), becomes a Ref: runtime, container id, pod UID, systemd
//     service, or the host. Pure string work; see ref.go for the path forms
//     of Docker, containerd, CRI-O, Podman, runc, LXC and Kubernetes.
//
//   - Table: maps the cgroup v2 id that every sysray event carries
//     (bpf_get_current_cgroup_id, the inode of the v2 directory) to a Ref,
//     by walking the v2 hierarchy, and maps pids to Refs by reading
//     /proc/*/cgroup, because on hybrid hosts a container's processes may
//     be placed only in the v1 hierarchies (their v2 cgroup is "/" or the
//     runtime's service). Lookups never block and never touch the file
//     system; refreshing and runtime metadata (names, images, labels,
//     Kubernetes pod) happen in background goroutines with timeouts, and a
//     runtime that is down or slow leaves callers with the bare id.
//
//   - Libc: which C library (glibc or musl) and version a process sees
//     inside its own root (/proc/PID/root), to show beside the host kernel
//     and vsyscall mode: an old glibc inside a new host is story 000.
//
// Metadata sources (sources.go): containerd's gRPC API, the Docker Engine
// API (also Podman's Docker-compatible socket) and the Kubernetes CRI.
package container
