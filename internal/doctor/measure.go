package doctor

import (
	"sync"
	"time"
)

type vsysCost struct {
	emulated float64 // ns per time() through the vsyscall page
	vdso     float64 // ns per time() through the vDSO
}

var (
	measureOnce sync.Once
	measured    vsysCost
	measuredOK  bool
)

// measureVsyscall times time() through the vsyscall page against the vDSO,
// on this host. Only where the kernel emulates calls: under vsyscall=none
// the call would kill sysray.
func measureVsyscall(mode string) (vsysCost, bool) {
	if mode != "xonly" && mode != "emulate" || !haveVsyscallCall {
		return vsysCost{}, false
	}
	measureOnce.Do(func() {
		const n = 20000
		t0 := time.Now()
		for range n {
			vsyscallTime()
		}
		emu := time.Since(t0)
		fn, ok := vdsoTime()
		if !ok {
			return
		}
		const m = 2000000
		t0 = time.Now()
		for range m {
			callTime(fn)
		}
		vdso := time.Since(t0)
		measured = vsysCost{emulated: float64(emu.Nanoseconds()) / n, vdso: float64(vdso.Nanoseconds()) / m}
		measuredOK = true
	})
	return measured, measuredOK
}
