package doctor

// Reading kernel stacks: frame names, and the frames that say a thread
// waited by design, for a CPU, or for the storage device.

import (
	"strings"

	"github.com/sysray/sysray/internal/event"
)

// Frames of a sleep that waits for the storage device.
var deviceFrames = []string{"submit_bio_wait", "blkdev_issue_discard", "blkdev_issue_flush", "bit_wait_io",
	"folio_wait_bit_common", "folio_wait_bit", "io_schedule", "io_schedule_timeout", "wait_on_page_bit_common",
	"jbd2_log_wait_commit", "filemap_read", "filemap_fault", "wait_for_completion_io_timeout", "wait_for_completion_io"}

func hasName(stack, names []string) bool {
	for _, f := range stack {
		if contains(names, funcOf(f)) {
			return true
		}
	}
	return false
}

// Frames of the scheduler itself say nothing about why a thread slept.
var schedFrames = []string{"__schedule", "schedule", "schedule_timeout", "schedule_hrtimeout_range",
	"schedule_hrtimeout_range_clock", "io_schedule", "schedule_preempt_disabled", "preempt_schedule",
	"__cond_resched", "preempt_schedule_irq", "preempt_schedule_common", "io_schedule_timeout"}

// Frames that mean the thread was waiting by design.
var waitFrames = []string{"do_nanosleep", "futex_wait", "ep_poll", "do_epoll_wait", "do_select", "do_sys_poll", "pipe_read", "anon_pipe_read", "pipe_wait_readable", "pipe_wait_writable", "anon_pipe_write",
	"n_tty_read", "wait_woken", "unix_stream_read_generic", "sk_wait_data", "inet_csk_accept", "do_wait",
	"sigsuspend", "__x64_sys_pause", "__skb_wait_for_more_packets", "poll_schedule_timeout", "read_events",
	"io_cqring_wait", "pipe_write", "unix_wait_for_peer", "wait_for_partner", "do_sigtimedwait", "futex_wait_queue", "sys_pause"}

func funcOf(frame string) string {
	f, _, _ := strings.Cut(frame, "+")
	f, _, _ = strings.Cut(f, " ")
	return f
}

// named reports whether any frame of stack has a name.
func named(stack []event.Frame) bool {
	for _, f := range stack {
		if f.Name != "" {
			return true
		}
	}
	return false
}

func hasFrame(stack []event.Frame, names []string) bool {
	for _, f := range stack {
		fn := funcOf(f.Name)
		for _, n := range names {
			if fn == n {
				return true
			}
		}
	}
	return false
}

// tracingFrame is a frame of the tracepoint that took the stack, not of
// the code that slept.
func tracingFrame(fn string) bool {
	return strings.HasPrefix(fn, "__traceiter_") || strings.HasPrefix(fn, "__bpf_trace_") || strings.HasPrefix(fn, "bpf_trace_run")
}

// where names the place a thread slept: the first frames past the scheduler.
func where(stack []event.Frame) (string, []string) {
	var all []string
	var key []string
	for _, f := range stack {
		all = append(all, f.Name)
		fn := funcOf(f.Name)
		if len(key) == 0 && (contains(schedFrames, fn) || tracingFrame(fn)) {
			continue
		}
		if len(key) < 3 && fn != "" {
			key = append(key, fn)
		}
	}
	return strings.Join(key, " ← "), all
}

// preempted reports a switch-out that was a wait for a CPU, not a sleep:
// the thread stayed runnable (preempted), or gave the CPU up at a
// rescheduling point inside a long kernel loop (cond_resched).
func preempted(sl *event.Sleep) bool {
	return sl.Preempted || hasFrame(sl.Stack, []string{"__cond_resched", "_cond_resched", "preempt_schedule",
		"preempt_schedule_common", "preempt_schedule_irq"})
}

// vforkWait reports a parent asleep in clone(CLONE_VFORK) or vfork until
// its child execs or exits: waiting is what vfork is for.
func vforkWait(stack []event.Frame) bool {
	return hasFrame(stack, []string{"wait_for_vfork_done"}) ||
		hasFrame(stack, []string{"kernel_clone"}) && hasFrame(stack, []string{"wait_for_completion_state",
			"wait_for_completion_killable", "__wait_for_common"})
}
