package host

import (
	"strings"
	"testing"
)

func TestConfigHZ(t *testing.T) {
	cfg := "CONFIG_HZ_250=y\n# CONFIG_HZ_1000 is not set\nCONFIG_HZ=250\nCONFIG_HZ_PERIODIC=n\n"
	if got := configHZ(strings.NewReader(cfg)); got != 250 {
		t.Errorf("HZ %d from %q, want 250", got, cfg)
	}
	if got := configHZ(strings.NewReader("CONFIG_HZ=\n")); got != 0 {
		t.Errorf("HZ %d from an empty value, want 0", got)
	}
}

func TestHzOfTick(t *testing.T) {
	for hz, tick := range map[int]int64{100: 10_000_000, 250: 4_000_000, 300: 3_333_333, 1000: 1_000_000, 24: 41_666_667} {
		if got := hzOfTick(tick); got != hz {
			t.Errorf("tick %d ns: HZ %d, want %d", tick, got, hz)
		}
	}
	// A clock with nanosecond resolution says nothing about the tick.
	for _, tick := range []int64{1, 0, 3_333_000} {
		if got := hzOfTick(tick); got != 0 {
			t.Errorf("tick %d ns: HZ %d, want 0", tick, got)
		}
	}
}

// Both ways of telling HZ agree where both work.
func TestHZAgreesWithConfig(t *testing.T) {
	cfg, tick := configFileHZ(), tickHZ()
	if cfg == 0 || tick == 0 {
		t.Skipf("config HZ %d, tick HZ %d: cannot compare", cfg, tick)
	}
	if cfg != tick {
		t.Errorf("HZ %d from the coarse clock, %d from the kernel config", tick, cfg)
	}
}
