package flight

import (
	"sync"
	"time"
)

// Cooldown limits an action to once per period for each key, e.g. one
// capture per finding (and container) while it keeps being reported. It is
// safe for concurrent use.
type Cooldown struct {
	period time.Duration
	mu     sync.Mutex
	last   map[string]time.Time
}

// NewCooldown returns a Cooldown with the given period.
func NewCooldown(period time.Duration) *Cooldown {
	return &Cooldown{period: period, last: map[string]time.Time{}}
}

// Allow reports whether key may act at now: it has never acted or last did
// at least the period before. When it may, now becomes its last time.
func (c *Cooldown) Allow(key string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.last[key]; ok && now.Sub(t) < c.period {
		return false
	}
	// Keys that have cooled down carry no information; forgetting them
	// keeps a stream of one-off keys (containers come and go) from growing
	// the map without bound.
	if len(c.last) >= 1024 {
		for k, t := range c.last {
			if now.Sub(t) >= c.period {
				delete(c.last, k)
			}
		}
	}
	c.last[key] = now
	return true
}
