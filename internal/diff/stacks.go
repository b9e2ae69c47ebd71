package diff

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/sysray/sysray/internal/event"
)

// Stacks is time by stack: frames joined by ';', root first (the folded
// format), weighted in ns.
type Stacks map[string]uint64

// offset is a frame's "+0x1d": dropped, so that a function's frames merge
// whichever instruction was on the stack, and builds a little apart still
// line up.
var offset = regexp.MustCompile(`\+0x[0-9a-f]+`)

// userTop bounds user-space addresses (x86-64 and arm64 with 47- or 48-bit
// virtual addresses).
const userTop = 1 << 48

func frameName(f event.Frame) string {
	if f.Name == "" {
		return fmt.Sprintf("%#x", f.Addr)
	}
	return strings.ReplaceAll(offset.ReplaceAllString(f.Name, ""), ";", ":")
}

// AddSyscall folds one captured syscall's stacks, if it carries them (with
// --stacks, the calls slower than --slow do). Off CPU, each place it slept
// weighs what it slept there, under the process, the user stack that made
// the call, the syscall and the kernel stack it was switched out at (a
// "[preempted]" leaf when it was still runnable); on CPU, the call weighs
// its latency less its sleeps, under the process, the user stack and the
// syscall. proc names the process (its comm, so that runs match); it
// returns whether the call carried stacks.
func (s Stacks) AddSyscall(e *event.Event, proc, syscall string, offCPU bool) bool {
	sc := &e.Syscall
	if e.Kind != event.KindSyscall || len(sc.UserStack) == 0 && len(sc.Sleeps) == 0 {
		return false
	}
	base := make([]string, 0, 2+len(sc.UserStack))
	base = append(base, strings.ReplaceAll(proc, ";", ":"))
	for i := len(sc.UserStack) - 1; i >= 0; i-- {
		f := sc.UserStack[i]
		// A frame-pointer walk that ran past the stack's end reads junk: an
		// unnamed address no user code can have would split the same
		// stack between runs.
		if f.Name == "" && f.Addr >= userTop {
			continue
		}
		base = append(base, frameName(f))
	}
	base = append(base, syscall+"_[k]")
	var slept uint64
	for _, sl := range sc.Sleeps {
		slept += sl.Duration
		if !offCPU || sl.Duration == 0 {
			continue
		}
		frames := append([]string(nil), base...)
		for i := len(sl.Stack) - 1; i >= 0; i-- {
			frames = append(frames, frameName(sl.Stack[i])+"_[k]")
		}
		if sl.Preempted {
			frames = append(frames, "[preempted]")
		}
		s[strings.Join(frames, ";")] += sl.Duration
	}
	if !offCPU && sc.Latency > slept {
		s[strings.Join(base, ";")] += sc.Latency - slept
	}
	return true
}

// Total is the weight of all stacks.
func (s Stacks) Total() uint64 {
	var t uint64
	for _, v := range s {
		t += v
	}
	return t
}
