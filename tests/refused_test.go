package tests

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// scenario builds scenarios/bin/NAME and returns its path.
func scenario(t *testing.T, names ...string) string {
	t.Helper()
	var targets []string
	for _, n := range names {
		targets = append(targets, "bin/"+n)
	}
	mk := exec.Command("make", append([]string{"-s", "-C", "../scenarios"}, targets...)...)
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("building %v: %v\n%s", targets, err, out)
	}
	p, _ := filepath.Abs("../scenarios/bin/" + names[0])
	return p
}

// A seccomp filter's answer never reaches sys_enter; the trace still shows
// every refused call, with its arguments, marked as refused, and nothing
// else marked.
func TestRefusedCallsTraced(t *testing.T) {
	requireBPF(t)
	run1 := scenario(t, "seccomp-run", "newlibc")
	const threads, checks = 3, 5
	r := runOut(t, "trace", "--json", "--", run1, "-a", "eperm", "--", "newlibc", "-t", "3", "-a", "5")
	if r.code != 1 {
		t.Fatalf("exit %d, want newlibc's 1 (its calls failed): %s", r.code, r.stderr)
	}
	var clone3, faccessat2, other int
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e struct {
			Syscall *struct {
				Name    string `json:"name"`
				Errno   string `json:"errno"`
				Refused bool   `json:"refused"`
				Args    []struct {
					Name, Value string
				} `json:"args"`
			} `json:"syscall"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("bad JSON %q: %v", line, err)
		}
		s := e.Syscall
		if s == nil || !s.Refused {
			continue
		}
		switch s.Name {
		case "clone3":
			clone3++
		case "faccessat2":
			faccessat2++
			args := map[string]string{}
			for _, a := range s.Args {
				args[a.Name] = a.Value
			}
			if args["pathname"] != `"/bin/sh"` || args["mode"] != "X_OK" || args["flags"] != "AT_EACCESS" {
				t.Errorf("faccessat2 arguments %v, want \"/bin/sh\", X_OK, AT_EACCESS", args)
			}
		default:
			other++
			t.Errorf("%s marked refused", s.Name)
		}
		if s.Errno != "EPERM" {
			t.Errorf("%s refused with %s, want EPERM", s.Name, s.Errno)
		}
	}
	if clone3 != threads || faccessat2 != checks {
		t.Errorf("refused clone3 %d, faccessat2 %d; want %d and %d", clone3, faccessat2, threads, checks)
	}
}

// stat counts refused calls as calls that failed, by errno, like strace -c.
func TestRefusedCallsCounted(t *testing.T) {
	requireBPF(t)
	run1 := scenario(t, "seccomp-run", "newlibc")
	r := runOut(t, "stat", "--json", "--", run1, "-a", "enosys", "--", "newlibc", "-t", "4", "-a", "7")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	c := sysrayCounts(t, r.stdout)
	for name, want := range map[string][2]uint64{"clone3": {4, 4}, "faccessat2": {7, 7}, "clone": {4, 0}, "faccessat": {7, 0}} {
		if c[name] != want {
			t.Errorf("%s: %v calls, errors; want %v", name, c[name], want)
		}
	}
}

// Killed by its filter: the signal names the call.
func TestSeccompKillSignal(t *testing.T) {
	requireBPF(t)
	run1 := scenario(t, "seccomp-run", "newlibc")
	r := runOut(t, "trace", "--json", "--", run1, "-a", "kill", "--", "newlibc")
	if r.code != 128+31 {
		t.Fatalf("exit %d, want %d (SIGSYS): %s", r.code, 128+31, r.stderr)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var e struct {
			Kind   string `json:"kind"`
			Signal *struct {
				Name      string `json:"name"`
				CodeName  string `json:"code_name"`
				Syscall   string `json:"syscall"`
				SyscallNr *int32 `json:"syscall_nr"`
			} `json:"signal"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("bad JSON %q: %v", line, err)
		}
		if e.Kind == "signal_generate" && e.Signal.Name == "SIGSYS" {
			found = true
			if e.Signal.CodeName != "SYS_SECCOMP" || e.Signal.Syscall != "clone3" || e.Signal.SyscallNr == nil || *e.Signal.SyscallNr != 435 {
				t.Errorf("SIGSYS: code %s, syscall %q; want SYS_SECCOMP, clone3 (435)", e.Signal.CodeName, e.Signal.Syscall)
			}
		}
	}
	if !found {
		t.Fatalf("no SIGSYS signal_generate:\n%s", r.stdout)
	}
}
