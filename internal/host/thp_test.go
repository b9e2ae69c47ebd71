package host

import "testing"

func TestMemoryFacts(t *testing.T) {
	root := writeTree(t, map[string]string{
		"sys/kernel/mm/transparent_hugepage/enabled": "always [madvise] never\n",
		"sys/kernel/mm/transparent_hugepage/defrag":  "always defer defer+madvise [madvise] never\n",
		"proc/sys/vm/compaction_proactiveness":       "20\n",
		"proc/sys/vm/min_free_kbytes":                "67584\n",
	})
	oldP, oldS := procRoot, sysRoot
	procRoot, sysRoot = root+"/proc", root+"/sys"
	defer func() { procRoot, sysRoot = oldP, oldS }()
	got := MemoryFacts()
	want := map[string]string{MetaTHPEnabled: "madvise", MetaTHPDefrag: "madvise",
		MetaCompactionProactiveness: "20", MetaMinFreeKbytes: "67584"}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
