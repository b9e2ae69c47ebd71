package probe

import (
	"math/bits"
	"testing"

	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/stat"
)

func TestUseBudget(t *testing.T) {
	c := Config{Stat: true, PIDs: []uint32{7}}
	c.UseBudget()
	if c.Budget != stat.DefaultBudget.PerJiffy || c.Every != stat.DefaultBudget.Every {
		t.Fatalf("budget %d, 1 in %d: want stat.DefaultBudget %+v", c.Budget, c.Every, stat.DefaultBudget)
	}
	// What the loader takes (configure): at most 255 a jiffy, and a power
	// of two from 2 to 65536.
	if c.Budget == 0 || c.Budget > 255 {
		t.Errorf("budget %d: the loader takes 1 to 255", c.Budget)
	}
	if c.Every < 2 || c.Every > 1<<16 || bits.OnesCount32(c.Every) != 1 {
		t.Errorf("1 in %d: the loader takes a power of two from 2 to 65536", c.Every)
	}
	if !c.Stat || len(c.PIDs) != 1 || c.PIDs[0] != 7 {
		t.Errorf("UseBudget changed the selection: %+v", c)
	}
	hz := host.HZ()
	if hz <= 0 {
		if c.TickNS != 0 {
			t.Errorf("HZ unknown, yet TickNS %d", c.TickNS)
		}
		return
	}
	if c.TickNS*uint64(hz) > 1e9 || c.TickNS*uint64(hz) < 1e9-uint64(hz) {
		t.Errorf("TickNS %d at HZ=%d: want a jiffy, 1s/HZ", c.TickNS, hz)
	}
	// Kernels are built with HZ from 100 to 1000.
	if c.TickNS < 1_000_000 || c.TickNS > 10_000_000 {
		t.Errorf("TickNS %d is not a jiffy of 1 to 10 ms", c.TickNS)
	}
}
