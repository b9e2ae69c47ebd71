package checkup

import (
	"github.com/sysray/sysray/internal/container"
	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/live"
	"github.com/sysray/sysray/internal/probe"
	"github.com/sysray/sysray/internal/profile"
	"github.com/sysray/sysray/internal/symbol"
)

// KernelSamples names the kernel frames of on-CPU samples; nil when the
// kernel's symbols cannot be read.
func KernelSamples(samples []probe.Sample) []doctor.CPUSample {
	kernel, err := symbol.LoadKernel()
	if err != nil {
		return nil
	}
	return kernelSamples(samples, func(a uint64) string { return live.FuncName(kernel.Resolve(a)) })
}

func kernelSamples(samples []probe.Sample, name func(addr uint64) string) []doctor.CPUSample {
	out := make([]doctor.CPUSample, 0, len(samples))
	for _, s := range samples {
		cs := doctor.CPUSample{PID: s.PID, Syscall: s.Syscall, Count: s.Count}
		for _, a := range s.Kernel {
			cs.Kernel = append(cs.Kernel, profile.Frame(name(a), a))
		}
		out = append(out, cs)
	}
	return out
}

// Libc names the C library of pid's container, "" when it cannot be read:
// Host.Libc on a live host.
func Libc(pid uint32) string {
	l, err := container.Libc(int(pid))
	if err != nil {
		return ""
	}
	return l.String()
}
