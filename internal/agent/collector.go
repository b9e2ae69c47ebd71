package agent

import "github.com/prometheus/client_golang/prometheus"

var (
	ctrLabels   = []string{"container", "pod", "namespace"}
	descLatency = prometheus.NewDesc("sysray_syscall_duration_seconds",
		"Time from entry to exit of syscalls, by syscall and container.",
		append([]string{"syscall"}, ctrLabels...), nil)
	descErrors = prometheus.NewDesc("sysray_syscall_errors_total",
		"Syscalls that failed, by syscall, errno and container.",
		append([]string{"syscall", "errno"}, ctrLabels...), nil)
	descVsyscalls = prometheus.NewDesc("sysray_vsyscall_emulations_total",
		"Calls into the legacy vsyscall page that the kernel emulated, by container.",
		ctrLabels, nil)
	descFaults = prometheus.NewDesc("sysray_page_faults_total",
		"User page faults, by container.", ctrLabels, nil)
	descSignals = prometheus.NewDesc("sysray_signals_total",
		"Signals delivered (to a handler, or to their default action, fatal ones included), by signal and the receiving container.",
		append([]string{"signal"}, ctrLabels...), nil)
	descDropped = prometheus.NewDesc("sysray_events_dropped_total",
		"What the kernel lost: events that found a ring buffer full (reason ring_buffer_full) and syscalls it could not add to its table of counts (count_table: the table was full; count_memory: a new cell found no memory, in a burst of new processes) and syscalls in flight across a reload of the probe for longer than its 1 s handover (reload_in_flight).",
		[]string{"reason"}, nil)
	descBPF = prometheus.NewDesc("sysray_bpf_run_seconds_total",
		"CPU time spent in sysray's BPF programs, by program (only while kernel.bpf_stats_enabled is 1).",
		[]string{"program"}, nil)
	descCells = prometheus.NewDesc("sysray_agent_kernel_cells",
		"The (process, cgroup, syscall) cells in the kernel's count table at the last read.", nil, nil)
	descLastRead = prometheus.NewDesc("sysray_agent_last_read_timestamp_seconds",
		"When the agent last read the kernel's counts.", nil, nil)
	descReloads = prometheus.NewDesc("sysray_agent_probe_reloads_total",
		"Times the agent reloaded its probe with empty tables (the kernel's tables were filling with processes long gone).", nil, nil)
	descUntraced = prometheus.NewDesc("sysray_agent_untraced_seconds_total",
		"Time the probe's reloads left the host untraced, at most: none when the new probe loads beside the old one and takes over; else from the read that found the tables filling to the new probe's attach. Calls made then are not counted.", nil, nil)
	descRatio = prometheus.NewDesc("sysray_syscall_sample_ratio",
		"The share of time the per-syscall programs are attached (--syscalls duty): syscall counts, errors and histograms are estimates, scaled by its inverse; 1 when every call is counted.", nil, nil)
)

// Describe implements prometheus.Collector.
func (a *Aggregator) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLatency, descErrors, descVsyscalls, descFaults, descSignals,
		descDropped, descBPF, descCells, descLastRead, descRatio, descReloads, descUntraced} {
		ch <- d
	}
}

// Collect implements prometheus.Collector from the last View: a scrape
// never reads the kernel.
func (a *Aggregator) Collect(ch chan<- prometheus.Metric) {
	v := a.View()
	if v.At.IsZero() {
		return
	}
	bounds := Bounds()
	for i := range v.Syscalls {
		s := &v.Syscalls[i]
		lv := []string{s.Syscall, s.Container, s.Pod, s.Namespace}
		cum := make(map[float64]uint64, len(bounds))
		var n uint64
		for j, b := range bounds {
			n += s.Buckets[j]
			cum[b] = n
		}
		ch <- prometheus.MustNewConstHistogram(descLatency, s.Count, float64(s.SumNS)/1e9, cum, lv...)
		for e, n := range s.Errnos {
			ch <- prometheus.MustNewConstMetric(descErrors, prometheus.CounterValue, float64(n),
				s.Syscall, e, s.Container, s.Pod, s.Namespace)
		}
	}
	for i := range v.Containers {
		c := &v.Containers[i]
		lv := []string{c.Container, c.Pod, c.Namespace}
		ch <- prometheus.MustNewConstMetric(descFaults, prometheus.CounterValue, float64(c.Faults), lv...)
		ch <- prometheus.MustNewConstMetric(descVsyscalls, prometheus.CounterValue, float64(c.Vsyscalls), lv...)
		for sig, n := range c.Signals {
			ch <- prometheus.MustNewConstMetric(descSignals, prometheus.CounterValue, float64(n),
				sig, c.Container, c.Pod, c.Namespace)
		}
	}
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(v.RingDrops), "ring_buffer_full")
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(v.Lost.Full), "count_table")
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(v.Lost.NoMem), "count_memory")
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(v.InFlight), "reload_in_flight")
	for name, d := range v.BPF {
		ch <- prometheus.MustNewConstMetric(descBPF, prometheus.CounterValue, d.Seconds(), name)
	}
	ch <- prometheus.MustNewConstMetric(descCells, prometheus.GaugeValue, float64(v.Cells))
	ch <- prometheus.MustNewConstMetric(descLastRead, prometheus.GaugeValue, float64(v.At.UnixNano())/1e9)
	ch <- prometheus.MustNewConstMetric(descRatio, prometheus.GaugeValue, 1/float64(max(v.Scale, 1)))
	ch <- prometheus.MustNewConstMetric(descReloads, prometheus.CounterValue, float64(v.Reloads))
	ch <- prometheus.MustNewConstMetric(descUntraced, prometheus.CounterValue, v.Untraced.Seconds())
}
