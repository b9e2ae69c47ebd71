// Package agent is `sysray agent`: one long-lived process per host that
// counts every syscall in the kernel and serves the counts to Prometheus,
// runs the doctor continuously and keeps a flight recorder (docs/agent.md).
// Run runs it from a Config; the command only binds flags.
//
// The metrics side folds periodic reads of the counts (a Source) into
// monotonic series by container and syscall, keeps the number of series
// bounded, and serves /metrics and the API. The kernel counts per
// (process, cgroup, syscall) cell; cells of exited processes linger or
// vanish, pids are reused, and the probe may be reloaded. Aggregator
// therefore never exports a kernel value as such: it adds the non-negative
// change of each cell since the previous read to the series the cell
// belongs to now, so a series only grows, whatever happens to the cells
// that fed it. Scrapes read a view built at the last fold; they never
// touch the kernel.
//
// The host side is the Source the agent runs on: the probe loaded over
// the whole host (probe.go), replaced before its tables fill by an empty
// one that takes over without a gap, its per-syscall programs
// duty-cycled (duty.go); the continuous doctor over
// rolling windows with its findings store and flight recorder
// (livedoctor.go); and the audit watch (audit.go), which finds a full
// audit backlog whatever the duty cycle and keeps the agent from waiting
// on files while every audited open waits.
package agent
