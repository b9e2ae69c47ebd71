package probe

import (
	"time"

	"github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/stat"
)

// UseBudget turns on budgeted timing (docs/stat.md) as stat and top run
// it unless told --exact-timing: the clock for a thread's first calls of a
// syscall in each tick, then 1 in 16. The tick is this host's, when it can
// be read, so that an untimed long call's latency stays bounded.
func (c *Config) UseBudget() {
	c.Budget = stat.DefaultBudget.PerJiffy
	c.Every = stat.DefaultBudget.Every
	if hz := host.HZ(); hz > 0 {
		c.TickNS = uint64(time.Second) / uint64(hz)
	}
}
