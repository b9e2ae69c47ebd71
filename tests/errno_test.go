package tests

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// resultLine parses the scenario's "RESULT k=v ..." line (scenarios/errno).
func resultLine(t *testing.T, stderr string) map[string]string {
	t.Helper()
	for _, line := range strings.Split(stderr, "\n") {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			m := map[string]string{}
			for _, kv := range strings.Fields(rest) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					m[k] = v
				}
			}
			return m
		}
	}
	t.Fatalf("no RESULT line from the scenario:\n%s", stderr)
	return nil
}

// evInt is an evidence field as an integer, and whether it was one.
func evInt(ev map[string]any, key string) (int64, bool) {
	v, ok := ev[key].(float64)
	return int64(v), ok
}

// resultInt is a RESULT field as an integer.
func resultInt(t *testing.T, m map[string]string, key string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(m[key], 10, 64)
	if err != nil {
		t.Fatalf("RESULT %s=%q: %v", key, m[key], err)
	}
	return n
}

// The mapcount demo: ENOMEM with gigabytes free. The finding gives the
// kernel's limit as /proc/sys/vm/max_map_count says it, the count the
// program measured, and every refusal: the retries it counted plus the
// fill's last mmap.
func TestStoryMapCount(t *testing.T) {
	requireBPF(t)
	rep, stderr := demoOut(t, "mapcount")
	f := top(t, rep, "map-count-limit", "critical")
	r := resultLine(t, stderr)
	b, err := os.ReadFile("/proc/sys/vm/max_map_count")
	if err != nil {
		t.Fatal(err)
	}
	limit, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if n, _ := evInt(f.Evidence, "max_map_count"); n != limit || resultInt(t, r, "max_map_count") != limit {
		t.Errorf("max_map_count %v in the finding, %s said by the program, want %d", f.Evidence["max_map_count"], r["max_map_count"], limit)
	}
	want := resultInt(t, r, "enomem_mmap") + resultInt(t, r, "enomem_mprotect") + 1
	if n, _ := evInt(f.Evidence, "failures"); n != want {
		t.Errorf("%v failures in the finding, want %d (the program's retries and its fill's last mmap)", f.Evidence["failures"], want)
	}
	procs, _ := f.Evidence["processes"].([]any)
	if len(procs) != 1 {
		t.Fatalf("%d processes in the finding, want 1", len(procs))
	}
	p, _ := procs[0].(map[string]any)
	if n, _ := evInt(p, "map_count"); n != resultInt(t, r, "maps") {
		t.Errorf("map_count %v in the finding, the program measured %s", p["map_count"], r["maps"])
	}
}

// The inotify demo: ENOSPC from inotify_add_watch with the disk far from
// full. The program holds its watches in a user namespace whose limit it
// lowered; the finding says how many it held, the limit, and each refusal.
func TestStoryInotify(t *testing.T) {
	requireBPF(t)
	rep, stderr := demoOut(t, "inotify")
	f := top(t, rep, "inotify-watch-limit", "warning")
	r := resultLine(t, stderr)
	for key, field := range map[string]string{"user_watches": "held", "namespace_limit": "limit", "refusals": "refused"} {
		if n, _ := evInt(f.Evidence, key); n != resultInt(t, r, field) {
			t.Errorf("%s %v in the finding, the program said %s=%s", key, f.Evidence[key], field, r[field])
		}
	}
	if f.Evidence["errno"] != "ENOSPC" {
		t.Errorf("errno %v, want ENOSPC", f.Evidence["errno"])
	}
}

// The ports demo: EADDRNOTAVAIL with every port of the client's range in
// TIME_WAIT, in the network namespace the program made: its range, not the
// host's.
func TestStoryPorts(t *testing.T) {
	requireBPF(t)
	rep, stderr := demoOut(t, "ports")
	f := top(t, rep, "port-range-exhausted", "warning")
	r := resultLine(t, stderr)
	if got, want := f.Evidence["port_range"], r["range"]; got != want {
		t.Errorf("port range %v in the finding, the program's namespace has %s", got, want)
	}
	if n, _ := evInt(f.Evidence, "refusals"); n != resultInt(t, r, "eaddrnotavail") {
		t.Errorf("%v refusals in the finding, the program counted %s", f.Evidence["refusals"], r["eaddrnotavail"])
	}
	if n, _ := evInt(f.Evidence, "time_wait"); n != resultInt(t, r, "ports") {
		t.Errorf("%v sockets in TIME_WAIT, want the range's %s ports", f.Evidence["time_wait"], r["ports"])
	}
}

// The addrinuse demo: bind's EADDRINUSE while another process of the
// program's own network namespace listens on the port. The finding names
// the port, the listener's state, every failure the program counted, and
// that it gave up with its exit status.
func TestStoryAddrInUse(t *testing.T) {
	requireBPF(t)
	rep, stderr := demoOut(t, "addrinuse")
	f := top(t, rep, "port-in-use", "warning")
	r := resultLine(t, stderr)
	if n, _ := evInt(f.Evidence, "port"); strconv.FormatInt(n, 10) != r["port"] {
		t.Errorf("port %v in the finding, the program bound %s", f.Evidence["port"], r["port"])
	}
	if n, _ := evInt(f.Evidence, "failures"); n != resultInt(t, r, "eaddrinuse") {
		t.Errorf("%v failures in the finding, the program counted %s", f.Evidence["failures"], r["eaddrinuse"])
	}
	if f.Evidence["holder_state"] != "LISTEN" || f.Evidence["netns_host"] != false {
		t.Errorf("holder %v in the host's namespace %v, want a listener in the program's own", f.Evidence["holder_state"], f.Evidence["netns_host"])
	}
	if n, _ := evInt(f.Evidence, "exit_status"); n != 1 {
		t.Errorf("exit status %v, want the program's 1", f.Evidence["exit_status"])
	}
}

// The textbusy demo: a write open of a running binary refused with
// ETXTBSY. The finding names the file, the server that runs it (the pid
// the program started), every refusal the program counted, and its exit.
func TestStoryTextBusy(t *testing.T) {
	requireBPF(t)
	rep, stderr := demoOut(t, "textbusy")
	f := top(t, rep, "text-busy", "warning")
	r := resultLine(t, stderr)
	if f.Evidence["path"] != r["file"] || f.Evidence["refused"] != "write" {
		t.Errorf("path %v (%v) in the finding, the program wrote %s", f.Evidence["path"], f.Evidence["refused"], r["file"])
	}
	if n, _ := evInt(f.Evidence, "failures"); n != resultInt(t, r, "etxtbsy") {
		t.Errorf("%v failures in the finding, the program counted %s", f.Evidence["failures"], r["etxtbsy"])
	}
	if hs := anyStrings(f.Evidence["holders"]); len(hs) != 1 || hs[0] != r["holder"] {
		t.Errorf("holders %v in the finding, the program started server %s", f.Evidence["holders"], r["holder"])
	}
	if n, _ := evInt(f.Evidence, "exit_status"); n != 1 {
		t.Errorf("exit status %v, want the program's 1", f.Evidence["exit_status"])
	}
}

// The rofs demo: creates refused with EROFS on a tmpfs remounted
// read-only in the program's own mount namespace. The finding names that
// mount, read-only at the superblock, in a namespace not the host's, and
// every refusal the program counted.
func TestStoryROFS(t *testing.T) {
	requireBPF(t)
	rep, stderr := demoOut(t, "rofs")
	f := top(t, rep, "read-only-fs", "warning")
	r := resultLine(t, stderr)
	if f.Evidence["mount_point"] != r["dir"] || f.Evidence["fstype"] != "tmpfs" || f.Evidence["super_ro"] != true ||
		f.Evidence["mount_namespace_own"] != true {
		t.Errorf("mount %v %v super_ro %v own namespace %v, want the program's read-only tmpfs at %s in its own namespace",
			f.Evidence["mount_point"], f.Evidence["fstype"], f.Evidence["super_ro"], f.Evidence["mount_namespace_own"], r["dir"])
	}
	if n, _ := evInt(f.Evidence, "failures"); n != resultInt(t, r, "erofs") {
		t.Errorf("%v failures in the finding, the program counted %s", f.Evidence["failures"], r["erofs"])
	}
	if n, _ := evInt(f.Evidence, "exit_status"); n != 1 {
		t.Errorf("exit status %v, want the program's 1", f.Evidence["exit_status"])
	}
}

// The memlock demo: mlock's ENOMEM at RLIMIT_MEMLOCK. The finding gives
// the limit and what the process held locked as the program measured
// them, and every refusal.
func TestStoryMemlock(t *testing.T) {
	requireBPF(t)
	rep, stderr := demoOut(t, "memlock")
	f := top(t, rep, "memlock-limit", "warning")
	r := resultLine(t, stderr)
	if n, _ := evInt(f.Evidence, "rlimit_memlock_soft"); n != resultInt(t, r, "limit_kb")<<10 {
		t.Errorf("RLIMIT_MEMLOCK %v in the finding, the program set %s KiB", f.Evidence["rlimit_memlock_soft"], r["limit_kb"])
	}
	if n, _ := evInt(f.Evidence, "vm_lck"); n != resultInt(t, r, "vmlck_kb")<<10 {
		t.Errorf("VmLck %v in the finding, the program held %s KiB", f.Evidence["vm_lck"], r["vmlck_kb"])
	}
	if n, _ := evInt(f.Evidence, "failures"); n != resultInt(t, r, "enomem") {
		t.Errorf("%v failures in the finding, the program counted %s ENOMEM", f.Evidence["failures"], r["enomem"])
	}
}

// The synloss demo: each connect's first SYN dropped, so each waits out
// the kernel's first retransmission timeout. The finding counts the
// connects the program measured as slow, and their median wait.
func TestStorySynLoss(t *testing.T) {
	requireBPF(t)
	rep, stderr := demoOut(t, "synloss")
	f := top(t, rep, "connect-retransmit", "warning")
	r := resultLine(t, stderr)
	if n, _ := evInt(f.Evidence, "connects_held_up"); n != resultInt(t, r, "slow") {
		t.Errorf("%v connects held up in the finding, the program measured %s slow", f.Evidence["connects_held_up"], r["slow"])
	}
	med, err := strconv.ParseFloat(r["median_ms"], 64)
	if err != nil {
		t.Fatal(err)
	}
	// The program times connect from user space, a few hundred µs more,
	// and prints it to 0.1 ms: the kernel's may be up to 0.05 ms over.
	if n, _ := evInt(f.Evidence, "median_wait_ns"); float64(n) > med*1e6+0.05e6 || float64(n) < med*1e6-5e6 {
		t.Errorf("median wait %v ns in the finding, the program measured %s ms", f.Evidence["median_wait_ns"], r["median_ms"])
	}
	if f.Evidence["cause"] != "SYNs dropped on the way" {
		t.Errorf("cause %v, want the dropped SYNs", f.Evidence["cause"])
	}
}
