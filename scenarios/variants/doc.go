// Package variants lists live reproductions that hit the doctor's mechanisms
// in other shapes than the bundled demos: other process and cgroup counts,
// other call counts and durations, another syscall reaching the same kernel
// path, trouble that began before sysray did, the ways of pointing sysray
// at it (-- CMD, -p PID, the whole host for --duration, --container NAME),
// and a real container (containerd and runc, with its own mount, pid,
// network and IPC namespaces) around the workload.
//
// Each variant states the finding it expects. A detector that keys on its
// demo rather than on its mechanism fails here: that is the point.
// `sysray demo --variants` runs them; tests/variants_test.go checks them.
package variants
