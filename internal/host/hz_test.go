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
