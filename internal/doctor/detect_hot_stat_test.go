package doctor

import (
	"fmt"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// du stats every file of a tree once, fast enough to spend a quarter of
// its time entering the kernel: its work, info. A loop that stats one file
// again and again at that rate wastes it: a warning.
func TestHotStatWarnsOnlyOnRepeatedPaths(t *testing.T) {
	const nrNewfstatat = 262
	for _, c := range []struct {
		name string
		path func(i int) string
		want Severity
	}{
		{"a tree walk", func(i int) string { return fmt.Sprintf("/usr/share/doc/f%d", i) }, Info},
		{"one file", func(int) string { return "/etc/app.conf" }, Warning},
	} {
		var evs []event.Event
		for i := range 25000 {
			e := sys(70, uint64(i)*5000, nrNewfstatat, 0, 1500, 0xffffff9c, 0x1000, 0x2000, 0)
			e.Syscall.Data[1] = []byte(c.path(i))
			evs = append(evs, e)
		}
		f := byID(findings(evs), HotSyscall)
		if f == nil || f.Severity != c.want {
			t.Errorf("%s: want a %v hot-syscall, got %+v", c.name, c.want, f)
		}
	}
}
