// Package variants lists live reproductions that hit the doctor's mechanisms
// in other shapes than the bundled demos: other process and cgroup counts,
// other call counts and durations, another syscall reaching the same kernel
// path, trouble that began before sysray did, and the three ways of pointing
// sysray at it (-- CMD, -p PID, the whole host for --duration).
//
// Each variant states the finding it expects. A detector that keys on its
// demo rather than on its mechanism fails here: that is the point.
// `sysray demo --variants` runs them; tests/variants_test.go checks them.
package variants
