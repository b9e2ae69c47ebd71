package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// A cgroup made after the epoch is newer; one made before it, and the
// root, are not; a removed one is unknown, so not newer.
func TestCgroupEpoch(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("SYSRAY_REQUIRE_BPF") == "1" {
			t.Fatal("needs root to make cgroups, but SYSRAY_REQUIRE_BPF=1")
		}
		t.Skip("needs root")
	}
	root := memRoot()
	if root == "" {
		t.Fatal("no memory cgroup hierarchy")
	}
	mk := func(name string) string {
		cg := "/sysray-epoch-test-" + strconv.Itoa(os.Getpid()) + "-" + name
		if err := os.Mkdir(filepath.Join(root, cg), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(filepath.Join(root, cg)) })
		return cg
	}
	before := mk("before")
	e := TakeCgroupEpoch()
	if e == nil {
		t.Fatal("no epoch")
	}
	after := mk("after")
	child := after + "/child"
	if err := os.Mkdir(filepath.Join(root, child), 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(filepath.Join(root, child))
	for cg, want := range map[string]bool{before: false, "/": false, after: true, child: true, "/sysray-no-such-cgroup": false} {
		if got := e.Newer(cg); got != want {
			t.Errorf("Newer(%s) = %v, want %v", cg, got, want)
		}
	}
	// Made again under the same name: a new cgroup, newer.
	if err := os.Remove(filepath.Join(root, before)); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, before), 0o755); err != nil {
		t.Fatal(err)
	}
	if !e.Newer(before) {
		t.Errorf("%s made again after the epoch reads as older", before)
	}
	var none *CgroupEpoch
	if none.Newer(after) {
		t.Error("no epoch: every cgroup is old")
	}
}
