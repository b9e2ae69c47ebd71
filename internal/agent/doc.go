// Package agent turns the kernel's running syscall counts into Prometheus
// metrics for a long-lived, whole-host sysray: it folds periodic reads of
// the counts (a Source) into monotonic series by container and syscall,
// keeps the number of series bounded, and serves /metrics and /api/health.
//
// The kernel counts per (process, cgroup, syscall) cell; cells of exited
// processes linger or vanish, pids are reused, and the probe may be
// reloaded. Aggregator therefore never exports a kernel value as such: it
// adds the non-negative change of each cell since the previous read to the
// series the cell belongs to now, so a series only grows, whatever happens
// to the cells that fed it.
//
// Scrapes read a view built at the last fold; they never touch the kernel.
// The Source interface is where other producers of counts (a duty-cycled
// probe, a replay) plug in.
package agent
