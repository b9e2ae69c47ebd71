package tests

// The kernel's verifier walks every path of a BPF program before it runs,
// and refuses one whose walk passes a million instructions
// (BPF_COMPLEXITY_LIMIT_INSNS). sysray's programs are one object whose
// constants each command sets, so each command's sys_exit is a different
// walk. A change that makes the walk branch more (a map key that depends
// on an error code, kept apart to the end of every caller; a helper with
// six branches whose result indexes an array) multiplies it, and the walk
// is paid at every start: `sysray doctor -p` misses whatever happens
// before it attaches. On a 2-CPU VM the doctor starts in 1 s when its
// sys_exit walks about 120,000 instructions, in 3 s at 445,124 (the
// branching histogram helper above, inlined at each caller). A quarter of the kernel's limit leaves room for
// another compiler or kernel to walk differently, and catches a change
// that would double the start-up before a user sees it.

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

const verifierBudget = 1_000_000 / 4

func TestVerifierBudget(t *testing.T) {
	alongside(t)
	requireBPF(t)
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer sleeper.Process.Kill()
	pid := strconv.Itoa(sleeper.Process.Pid)
	capFile := filepath.Join(t.TempDir(), "v.sysray")
	for _, args := range [][]string{
		{"stat"},
		{"stat", "--exact-timing"},
		{"doctor"},
		{"trace"},
		{"record", "-w", capFile},
		{"record", "--stacks", "-w", capFile},
		{"record", "--cpu-wait", "-w", capFile},
	} {
		c := startAttached(t, append(args, "-p", pid)...)
		checkVerified(t, args, verified(t, c.Process.Pid))
		c.Process.Kill()
		c.Wait()
	}
	// The agent, with its doctor and without, duty-cycled and not.
	for _, args := range [][]string{{"--syscalls", "duty"}, {"--no-doctor"}} {
		a := startAgent(t, args...)
		checkVerified(t, append([]string{"agent"}, args...), verified(t, a.cmd.Process.Pid))
		a.stop(t)
	}
}

func checkVerified(t *testing.T, args []string, progs map[string]int) {
	t.Helper()
	if progs["sys_exit"] == 0 || progs["sys_enter"] == 0 {
		t.Fatalf("%v: no sys_enter or sys_exit among its programs: %v", args, progs)
	}
	most, name := 0, ""
	for n, v := range progs {
		if v > most {
			most, name = v, n
		}
		if v > verifierBudget {
			t.Errorf("%v: the verifier walked %d instructions of %s, past %d (a quarter of the kernel's limit)", args, v, n, verifierBudget)
		}
	}
	t.Logf("%v: %d programs, the longest walk %s's, %d instructions", args, len(progs), name, most)
}

// verified is how many instructions the verifier walked for each BPF
// program process pid holds, by name.
func verified(t *testing.T, pid int) map[string]int {
	t.Helper()
	infos, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/fdinfo/*")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, path := range infos {
		f, err := os.Open(path)
		if err != nil {
			continue // closed since
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			v, ok := strings.CutPrefix(sc.Text(), "prog_id:")
			if !ok {
				continue
			}
			id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err != nil {
				t.Fatalf("%s: %q", path, sc.Text())
			}
			p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
			if err != nil {
				t.Fatalf("program %d: %v", id, err)
			}
			info, err := p.Info()
			p.Close()
			if err != nil {
				t.Fatalf("program %d: %v", id, err)
			}
			n, ok := info.VerifiedInstructions()
			if !ok {
				t.Fatalf("program %d (%s): the kernel does not say how many instructions it verified", id, info.Name)
			}
			out[info.Name] = max(out[info.Name], int(n))
		}
		f.Close()
	}
	return out
}
