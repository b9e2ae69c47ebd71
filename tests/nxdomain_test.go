package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// The ndots demo: glibc looks api.sysray.test up under search corp.test
// svc.test and ndots:5, so each getaddrinfo(AF_UNSPEC) asks A and AAAA
// at both search domains (answered "no such name") before the name as
// written. Every answer of the followed sockets crosses over, so the
// finding's counts are exact: 4 failed answers a lookup, 6 answers in all.
func TestStoryNXDomain(t *testing.T) {
	requireBPF(t)
	rep, out := demoOut(t, "ndots")
	m := regexp.MustCompile(`RESULT procs=\d+ lookups=(\d+) failed=(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no RESULT line from the scenario:\n%s", out)
	}
	lookups, _ := strconv.Atoi(m[1])
	if m[2] != "0" || lookups == 0 {
		t.Fatalf("%s of %d lookups failed; against the search responder every one is found", m[2], lookups)
	}
	f := top(t, rep, "dns-nxdomain", "warning")
	for k, want := range map[string]float64{
		"lookups": float64(lookups), "failed_answers": float64(4 * lookups), "answers": float64(6 * lookups),
		"most_lookups_of_a_name": float64(lookups), "processes": 1, "fewest_dots": 2, "wasted_per_lookup": 4,
	} {
		if got, _ := f.Evidence[k].(float64); got != want {
			t.Errorf("%s = %v, want %v", k, f.Evidence[k], want)
		}
	}
	failed, _ := f.Evidence["search_domains_failed"].(map[string]any)
	if fmt.Sprint(failed) != fmt.Sprintf("map[corp.test:%d svc.test:%d]", lookups, lookups) {
		t.Errorf("search_domains_failed %v, want %d lookups failed at each of corp.test and svc.test", failed, lookups)
	}
	names, _ := f.Evidence["names"].([]any)
	if len(names) != 1 || fmt.Sprint(names[0].(map[string]any)["name"]) != "api.sysray.test" {
		t.Errorf("names %v, want api.sysray.test alone", names)
	}
}

// An answer's bytes are copied only from a socket whose peer is port 53:
// the same "no such name" answers, read from a socket connected to port
// 9999, make no finding and name nothing.
func TestDNSAnswerOnlyPort53(t *testing.T) {
	requireBPF(t)
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("no python3")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal("no unshare (util-linux)")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "answers.py")
	// In a network namespace of its own: port 53 of its loopback is free.
	if err := os.WriteFile(script, []byte(`import socket, fcntl, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
ifr = struct.pack("16sH", b"lo", 0)
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, ifr))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))
def query(name):
    q = bytes.fromhex("123401000001000000000000")
    for l in name.split("."):
        q += bytes([len(l)]) + l.encode()
    return q + b"\x00\x00\x01\x00\x01"
for port, name in ((53, "found53.test"), (9999, "secret9999.test")):
    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); srv.bind(("127.0.0.1", port))
    for i in range(5):
        c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.connect(("127.0.0.1", port))
        c.send(query(name))
        q, peer = srv.recvfrom(512)
        a = bytearray(q); a[2] = 0x81; a[3] = 0x83  # a response, NXDOMAIN
        srv.sendto(bytes(a), peer)
        c.recv(512)
        c.close()
`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, "doctor", "--json", "--", unshare, "-n", py, script)
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	f := top(t, rep, "dns-nxdomain", "warning")
	names, _ := f.Evidence["names"].([]any)
	if len(names) != 1 || fmt.Sprint(names[0].(map[string]any)["name"]) != "found53.test" {
		t.Errorf("names %v, want found53.test alone (port 9999's answers are never copied)", names)
	}
	if got, _ := f.Evidence["failed_answers"].(float64); got != 5 {
		t.Errorf("failed_answers %v, want 5", f.Evidence["failed_answers"])
	}
	b, _ := json.Marshal(rep)
	if regexp.MustCompile(`secret9999`).Match(b) {
		t.Errorf("the report holds port 9999's name: %s", b)
	}
}
