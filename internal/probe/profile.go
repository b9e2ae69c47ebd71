package probe

import (
	"bytes"
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Sample is the count of on-CPU samples that share a stack.
type Sample struct {
	PID     uint32
	Comm    string
	Kernel  []uint64 // innermost first; empty when the sample hit user space
	User    []uint64
	Syscall int32 // syscall in progress, -1 for none
	Count   uint64
}

// Sampling describes the running sampler.
type Sampling struct {
	Event string // "cycles" or "cpu-clock"
	Hz    int
	fds   []int
	links []link.Link
}

// StartSampling samples every CPU hz times a second, counting stacks in the
// kernel. It uses the CPU cycles counter where the PMU has one (so time in
// the kernel with interrupts off is seen too), else the CPU clock.
func (p *Probe) StartSampling(hz int) (*Sampling, error) {
	if !p.stacksOn {
		return nil, errors.New("sampling needs the probe opened with Stacks")
	}
	ncpu, err := possibleCPUs()
	if err != nil {
		return nil, err
	}
	s := &Sampling{Hz: hz}
	for _, ev := range []struct {
		name   string
		typ    uint32
		config uint64
	}{
		{"cycles", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES},
		{"cpu-clock", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_CLOCK},
	} {
		s.Event = ev.name
		err = s.open(p.objs.OnCpu, ncpu, ev.typ, ev.config)
		if err == nil {
			return s, nil
		}
		s.Close()
		s.fds, s.links = nil, nil
	}
	return nil, fmt.Errorf("sampling: %w", err)
}

func (s *Sampling) open(prog *ebpf.Program, ncpu int, typ uint32, config uint64) error {
	for cpu := range ncpu {
		attr := unix.PerfEventAttr{
			Type:   typ,
			Config: config,
			Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
			Sample: uint64(s.Hz),
			Bits:   unix.PerfBitFreq,
		}
		fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO) {
			continue // CPU not present
		}
		if err != nil {
			return err
		}
		s.fds = append(s.fds, fd)
		l, err := link.AttachRawLink(link.RawLinkOptions{Target: fd, Program: prog, Attach: ebpf.AttachPerfEvent})
		if err != nil {
			return err
		}
		s.links = append(s.links, l)
	}
	if len(s.links) == 0 {
		return errors.New("no CPU to sample")
	}
	return nil
}

// Pause stops taking samples on every CPU until Resume; a paused sampler
// costs nothing (the agent's duty cycling: outside the stretches syscalls
// are traced, a sample could not tell which call the CPU was in).
func (s *Sampling) Pause() {
	for _, fd := range s.fds {
		unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
	}
}

// Resume takes samples again after Pause.
func (s *Sampling) Resume() {
	for _, fd := range s.fds {
		unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0)
	}
}

// Close stops sampling.
func (s *Sampling) Close() {
	for _, l := range s.links {
		l.Close()
	}
	for _, fd := range s.fds {
		unix.Close(fd)
	}
}

// SampledPIDs lists the processes with samples so far, to read their maps
// while they are alive.
func (p *Probe) SampledPIDs() []uint32 {
	var k sysrayProfKey
	var n uint64
	seen := map[uint32]bool{}
	var out []uint32
	it := p.objs.Profile.Iterate()
	for it.Next(&k, &n) {
		if !seen[k.Pid] {
			seen[k.Pid] = true
			out = append(out, k.Pid)
		}
	}
	return out
}

// Samples reads the counts gathered so far, and how many samples found the
// count map full.
func (p *Probe) Samples() ([]Sample, uint64, error) {
	var (
		k     sysrayProfKey
		n     uint64
		out   []Sample
		cache = map[int32][]uint64{}
	)
	stack := func(id int32) []uint64 {
		if id < 0 {
			return nil
		}
		if s, ok := cache[id]; ok {
			return s
		}
		s := p.stack(id)
		cache[id] = s
		return s
	}
	it := p.objs.Profile.Iterate()
	for it.Next(&k, &n) {
		comm := make([]byte, 0, 16)
		for _, c := range k.Comm {
			if c == 0 {
				break
			}
			comm = append(comm, byte(c))
		}
		out = append(out, Sample{PID: k.Pid, Comm: string(bytes.Clone(comm)), Kernel: stack(k.Kstack),
			User: stack(k.Ustack), Syscall: int32(k.Syscall) - 1, Count: n})
	}
	if err := it.Err(); err != nil {
		return nil, 0, err
	}
	var lost []uint64
	var total uint64
	if err := p.objs.ProfLost.Lookup(uint32(0), &lost); err == nil {
		for _, l := range lost {
			total += l
		}
	}
	return out, total, nil
}
