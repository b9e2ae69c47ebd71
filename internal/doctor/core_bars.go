package doctor

import "github.com/sysray/sysray/internal/event"

// The bars several detectors share. A detector's own thresholds live in
// its file; these are here because they mean the same thing wherever they
// are used, so they must not drift apart.

// slowMin: below this a syscall is not slow enough to report at all, and
// the probe keeps no sleep for it: `--slow`'s default, when Host.Slow does
// not say (event.DefaultSlow).
const slowMin = uint64(event.DefaultSlow)

// slowWarn: at this a single call is a visible stall (a request, a frame,
// a tick).
const slowWarn = 100_000_000

// cheapNS: a call whose mean is under 2 µs does little beyond entering and
// leaving the kernel (an empty call costs 0.2-0.5 µs here), so calling it
// less is the only way to make it cheaper: hot-syscall's, and no kernel
// path's cost (kernel-hotspot leaves such calls to it).
const cheapNS = 2000

// warnShare: a cost that takes a quarter of the time of the threads that
// pay it would, removed, make them a third faster: worth a warning.
// kernel-contention, kernel-hotspot, hot-syscall, blocked-in-kernel-io
// and mmap-lock-contention weigh a cost by this one share.
const warnShare = 0.25

// warnWaitNS: a wait that reaches warnShare must also add up to 100 ms to
// be a warning; less is felt by no one, however large a share of a short
// process it is.
const warnWaitNS = 100_000_000
