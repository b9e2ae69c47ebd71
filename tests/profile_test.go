package tests

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

type folded struct {
	frames []string
	count  uint64
}

func readFolded(t *testing.T, path string) []folded {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []folded
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		n, err := strconv.ParseUint(line[i+1:], 10, 64)
		if i < 0 || err != nil {
			t.Fatalf("bad folded line %q", line)
		}
		out = append(out, folded{strings.Split(line[:i], ";"), n})
	}
	return out
}

// userLeaf is the innermost user-space frame of a folded stack.
func userLeaf(frames []string) string {
	leaf := ""
	for _, f := range frames[1:] {
		if strings.HasSuffix(f, "_[k]") {
			break
		}
		leaf = f
	}
	return leaf
}

// A program that spins in hot_user() for a second, then calls getppid
// 5,000,000 times (about a second): hot_user must top its user stacks, and getppid's kernel
// path must show under the syscall.
func TestProfileHotFunctionAndSyscallPath(t *testing.T) {
	requireBPF(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "p.folded")
	r := run(t, "profile", "-o", out, "--", prog("hotloop"), "1", "5000000")
	if r.code != 0 {
		t.Fatalf("profile: exit %d: %s", r.code, r.stderr)
	}
	var total, user, getppid uint64
	leaves := map[string]uint64{} // user samples by innermost function
	for _, s := range readFolded(t, out) {
		total += s.count
		inKernel := strings.HasSuffix(s.frames[len(s.frames)-1], "_[k]")
		if !inKernel {
			user += s.count
			leaf, _, _ := strings.Cut(userLeaf(s.frames), " ")
			leaves[leaf] += s.count
		}
		if strings.Contains(strings.Join(s.frames, ";"), "sys_getppid") {
			getppid += s.count
		}
	}
	if total < 50 {
		t.Fatalf("%d samples for a 1 s spin at 99 Hz", total)
	}
	// The second second runs the getppid loop, whose user half is spread
	// over main and the syscall wrapper: hot_user must lead, with most.
	hot := leaves["hot_user"]
	for leaf, n := range leaves {
		if leaf != "hot_user" && n >= hot {
			t.Errorf("%s has %d user samples, hot_user %d: want hot_user on top (%v)", leaf, n, hot, leaves)
		}
	}
	if hot*2 < user {
		t.Errorf("hot_user has %d of %d user samples, want at least half", hot, user)
	}
	if getppid == 0 {
		t.Errorf("no sample in getppid's kernel path")
	}
	if !strings.Contains(r.stdout, "hotloop[") || !strings.Contains(r.stdout, "getppid") {
		t.Errorf("summary lacks the process or its syscall:\n%s", r.stdout)
	}
}

// The same binary run from another root (chroot): its frames still resolve.
func TestProfileOtherRoot(t *testing.T) {
	requireBPF(t)
	root := t.TempDir()
	os.Chmod(root, 0o755)
	b, err := os.ReadFile(prog("hotloop"))
	if err != nil {
		t.Fatal(err)
	}
	// A path that exists only inside the new root.
	os.MkdirAll(filepath.Join(root, "jail/bin"), 0o755)
	if err := os.WriteFile(filepath.Join(root, "jail/bin/spinner"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "p.folded")
	r := run(t, "profile", "-o", out, "--", "chroot", root, "/jail/bin/spinner", "0.7")
	if r.code != 0 {
		t.Fatalf("profile: exit %d: %s", r.code, r.stderr)
	}
	var hot uint64
	for _, s := range readFolded(t, out) {
		if strings.HasPrefix(userLeaf(s.frames), "hot_user (spinner)") {
			hot += s.count
		}
	}
	if hot < 20 {
		t.Fatalf("only %d samples named hot_user (spinner) for a 0.7 s spin in a chroot", hot)
	}
}

func TestProfilePprofAndSVG(t *testing.T) {
	requireBPF(t)
	dir := t.TempDir()
	pb := filepath.Join(dir, "p.pb.gz")
	if r := run(t, "profile", "-o", pb, "--", prog("hotloop"), "0.5"); r.code != 0 {
		t.Fatalf("profile: exit %d: %s", r.code, r.stderr)
	}
	top, err := exec.Command("go", "tool", "pprof", "-top", pb).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -top: %v\n%s", err, top)
	}
	if !bytes.Contains(top, []byte("hot_user")) {
		t.Errorf("pprof -top does not list hot_user:\n%s", top)
	}

	svg := filepath.Join(dir, "p.svg")
	if r := run(t, "profile", "-o", svg, "--", prog("hotloop"), "0.5"); r.code != 0 {
		t.Fatalf("profile: exit %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	// Well-formed XML, self-contained, and hot_user is a frame in it.
	dec := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
	}
	for _, bad := range []string{"href=\"http", "src=\"http", "@import", "url(http"} {
		if bytes.Contains(b, []byte(bad)) {
			t.Errorf("SVG refers to something outside itself: %s", bad)
		}
	}
	if !bytes.Contains(b, []byte("<title>hot_user (hotloop)")) {
		t.Errorf("SVG has no hot_user frame")
	}
}
