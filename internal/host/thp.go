package host

import (
	"os"
	"path/filepath"
	"strings"
)

// sysRoot is where sysfs is mounted; tests point it at a fake tree.
var sysRoot = "/sys"

// The settings that decide whether a page fault may stall compacting or
// reclaiming memory for a transparent huge page, and how early the kernel
// compacts and reclaims in the background instead. Meta keys of the
// capture header (docs/capture-format.md); the THP ones hold the choice in
// force ("madvise"), not the list /sys shows.
const (
	MetaTHPEnabled              = "transparent_hugepage.enabled"
	MetaTHPDefrag               = "transparent_hugepage.defrag"
	MetaCompactionProactiveness = "vm.compaction_proactiveness"
	MetaWatermarkScaleFactor    = "vm.watermark_scale_factor"
	MetaMinFreeKbytes           = "vm.min_free_kbytes"
)

// THPSetting reads one of /sys/kernel/mm/transparent_hugepage/{enabled,defrag}
// and returns the choice in brackets ("madvise" of "always [madvise] never");
// "" when it cannot be read (no THP in this kernel).
func THPSetting(name string) string {
	b, err := os.ReadFile(filepath.Join(sysRoot, "kernel/mm/transparent_hugepage", name))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.IndexByte(s, '[')
	j := strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return strings.TrimSpace(s)
	}
	return s[i+1 : j]
}

// MemoryFacts reads the settings above, leaving out what it cannot read.
func MemoryFacts() map[string]string {
	m := map[string]string{}
	if v := THPSetting("enabled"); v != "" {
		m[MetaTHPEnabled] = v
	}
	if v := THPSetting("defrag"); v != "" {
		m[MetaTHPDefrag] = v
	}
	for _, k := range []string{MetaCompactionProactiveness, MetaWatermarkScaleFactor, MetaMinFreeKbytes} {
		if v, err := Sysctl(k); err == nil && v != "" {
			m[k] = v
		}
	}
	return m
}
