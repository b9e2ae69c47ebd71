package agent

import (
	"context"
	"time"

	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/probe"
)

// dutyDrain is how long after pausing the syscall programs the doctor's
// window waits for their last events: a reader's sleep while they were
// attached (10 ms at most for the agent's rings), its first sleep after the
// pause (probe.readRing, 10 ms) and the merger's slack, with room to spare.
const dutyDrain = 150 * time.Millisecond

// dutyCycle attaches the per-syscall programs for on in every period until
// ctx ends, so that a syscall-heavy host pays their cost a fraction of the
// time; everything else stays attached. With the doctor, its window is the
// period, closed once each on stretch's events are in.
func (s *probeSource) dutyCycle(ctx context.Context, on, period time.Duration) {
	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	for {
		start := time.Now()
		s.setOff(false)
		if p, smp := s.currentSampling(); p != nil {
			if err := p.ResumeSyscalls(); err != nil {
				s.log.Error("attaching the syscall programs failed", "error", err.Error())
			}
			if smp != nil {
				smp.Resume()
			}
		}
		from := host.Mono()
		if !sleep(on) {
			return
		}
		s.setOff(true)
		p, smp := s.currentSampling()
		if p != nil {
			p.PauseSyscalls()
			if smp != nil {
				smp.Pause()
			}
		}
		to := host.Mono()
		if s.doc != nil {
			if !sleep(dutyDrain) {
				return
			}
			s.doc.closeWindow(p, [2]uint64{from, to})
		}
		if !sleep(period - time.Since(start)) {
			return
		}
	}
}

// setOff records whether the syscall programs should be off now, for a
// probe loaded meanwhile (a reload starts with them attached).
func (s *probeSource) setOff(off bool) {
	s.mu.Lock()
	s.off = off
	s.mu.Unlock()
}

// quiet is the current probe's Quiet: whether its syscall programs are
// paused, and the channel their resume closes. Without a probe (between
// loads) it says not.
func (s *probeSource) quiet() (bool, <-chan struct{}) {
	if p, _ := s.currentSampling(); p != nil {
		return p.Quiet()
	}
	return false, nil
}

// currentSampling is the probe loaded now and its on-CPU sampler (either
// may be nil).
func (s *probeSource) currentSampling() (*probe.Probe, *probe.Sampling) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.load == nil {
		return nil, nil
	}
	return s.load.p, s.load.sampling
}
