package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/sysray/sysray/internal/stat"
)

// Every setting out of range is refused in the words of its flag; the
// defaults pass.
func TestConfigCheck(t *testing.T) {
	d := Defaults
	if err := d.Check(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, c := range []struct {
		flag string
		set  func(*Config)
	}{
		{"--interval", func(c *Config) { c.Interval = 50 * time.Millisecond }},
		{"--max-containers", func(c *Config) { c.MaxContainers = -1 }},
		{"--max-syscalls", func(c *Config) { c.MaxSyscalls = 0 }},
		{"--grace", func(c *Config) { c.Grace = 0 }},
		{"--buffer-size", func(c *Config) { c.RingMiB = 2048 }},
		{"--reload-cells", func(c *Config) { c.ReloadCells = statCells + 1 }},
		{"--cooldown", func(c *Config) { c.Cooldown = -time.Second }},
		{"--window", func(c *Config) { c.Window = 500 * time.Millisecond }},
		{"--flight-bytes", func(c *Config) { c.FlightBytes = 1000 }},
		{"--capture-max-files", func(c *Config) { c.CaptureFiles = 0 }},
		{"--duty-on", func(c *Config) { c.DutyOn = 50 * time.Millisecond }},
		{"--duty-period", func(c *Config) { c.DutyOn, c.DutyPeriod = time.Second, 1500*time.Millisecond }},  // not a multiple
		{"--otlp-endpoint", func(c *Config) { c.OTLPEndpoint = "127.0.0.1:4318" }},                          // no scheme
		{"--otlp-endpoint", func(c *Config) { c.OTLPEndpoint, c.NoDoctor = "http://127.0.0.1:4318", true }}, // no findings
	} {
		cfg := Defaults
		c.set(&cfg)
		err := cfg.Check()
		if err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%s out of range: %v", c.flag, err)
		}
	}
	// Always attached: the duty settings do not matter.
	always := Defaults
	always.Always, always.DutyOn = true, 0
	if err := always.Check(); err != nil {
		t.Errorf("--syscalls always with no duty: %v", err)
	}
}

// The probe is reloaded before one of the kernel's tables fills: the
// count table at --reload-cells, the process table and the errno table
// (each process and syscall's errnos once, though every cell of the pair
// carries them) at three quarters.
func TestFilling(t *testing.T) {
	s := &probeSource{reloadAt: 4}
	cells := func(n int, errnos int) []stat.Cell {
		var out []stat.Cell
		for i := range n {
			c := stat.Cell{Key: stat.Key{PID: uint32(i / 2), Nr: 0, Cgroup: uint64(i)}}
			if errnos > 0 {
				c.Errnos = map[int]uint64{}
				for e := range errnos {
					c.Errnos[e+1] = 1
				}
			}
			out = append(out, c)
		}
		return out
	}
	if s.filling(Snapshot{Cells: cells(3, 0)}) {
		t.Error("3 cells of 4: not filling")
	}
	if !s.filling(Snapshot{Cells: cells(4, 0)}) {
		t.Error("4 cells of 4: filling")
	}
	procs := map[uint32]ProcCounts{}
	for pid := range uint32(procCells * 3 / 4) {
		procs[pid] = ProcCounts{}
	}
	if !s.filling(Snapshot{Procs: procs}) {
		t.Error("the process table three quarters full: filling")
	}
	// Two cells per (pid, syscall): errnos count once per pair.
	big := &probeSource{reloadAt: statCells}
	const per = 12 // errnos per pair: the table is filling at 1024 pairs
	if pairs := errnoCells * 3 / 4 / per; big.filling(Snapshot{Cells: cells(2*(pairs-1), per)}) {
		t.Errorf("%d pairs of %d errnos: not filling", pairs-1, per)
	} else if !big.filling(Snapshot{Cells: cells(2*pairs, per)}) {
		t.Errorf("%d pairs of %d errnos: filling", pairs, per)
	}
}
