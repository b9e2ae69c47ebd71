// Package probe loads sysray's BPF programs (bpf/sysray.bpf.c, compiled by
// bpf2go and committed), pushes the selection into the kernel, and reads the
// per-CPU ring buffers back in time order as events. It also reads what the
// kernel aggregates itself: syscall counts and histograms (stat mode),
// on-CPU stack samples and the stacks of slow syscalls.
package probe
