package profile

import (
	"io"
	"time"

	"github.com/google/pprof/profile"
)

// Pprof writes the profile in pprof's gzipped protobuf format.
func (p *Profile) Pprof(w io.Writer) error {
	period := int64(time.Second) / int64(max(p.Hz, 1))
	out := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        period,
		DurationNanos: p.Duration.Nanoseconds(),
	}
	funcs := map[string]*profile.Function{}
	locs := map[string]*profile.Location{}
	loc := func(name string) *profile.Location {
		if l, ok := locs[name]; ok {
			return l
		}
		f := &profile.Function{ID: uint64(len(funcs) + 1), Name: name, SystemName: name}
		funcs[name] = f
		out.Function = append(out.Function, f)
		l := &profile.Location{ID: uint64(len(locs) + 1), Line: []profile.Line{{Function: f}}}
		locs[name] = l
		out.Location = append(out.Location, l)
		return l
	}
	for i := range p.Stacks {
		s := &p.Stacks[i]
		frames := s.Frames()
		// pprof wants the leaf first.
		ls := make([]*profile.Location, len(frames))
		for j, f := range frames {
			ls[len(frames)-1-j] = loc(f)
		}
		sample := &profile.Sample{Location: ls, Value: []int64{int64(s.Count), int64(s.Count) * period},
			Label: map[string][]string{"comm": {s.Comm}}, NumLabel: map[string][]int64{"pid": {int64(s.PID)}}}
		if s.Syscall != "" {
			sample.Label["syscall"] = []string{s.Syscall}
		}
		out.Sample = append(out.Sample, sample)
	}
	if err := out.CheckValid(); err != nil {
		return err
	}
	return out.Write(w)
}
