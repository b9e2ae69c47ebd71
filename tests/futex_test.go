package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Eight threads serialised on one mutex: the doctor says lock-convoy, with
// the address, the threads and the waiter's code.
func TestStoryLockConvoy(t *testing.T) {
	requireBPF(t)
	f := top(t, demo(t, "lockconvoy"), "lock-convoy", "warning")
	has(t, f, "address", "threads_waiting", "share_of_thread_time", "waits_slept", "hand_offs", "mean_wait_ns")
	if n, _ := f.Evidence["threads_waiting"].(float64); n != 8 {
		t.Errorf("%v threads waiting, want the 8 the program started", f.Evidence["threads_waiting"])
	}
	// 8 threads on 2 CPUs, one at a time inside the lock: most of their
	// time is the wait.
	if s, _ := f.Evidence["share_of_thread_time"].(float64); s < 0.4 {
		t.Errorf("share %v, want most of the threads' time", s)
	}
	if w := anyStrings(f.Evidence["waiter_stack"]); !strings.Contains(strings.Join(w, " "), "convoy_thread") {
		t.Errorf("waiter stack %v, want the program's convoy_thread", w)
	}
}

// lockconvoy -l spin counts its own futex calls: the sums the kernel kept
// must be those counts exactly, since every call is counted at its exit
// and the program starts and ends inside the trace.
func TestLockConvoyGroundTruth(t *testing.T) {
	requireBPF(t)
	bin := scenarioBin(t, "lockconvoy")
	out := filepath.Join(t.TempDir(), "report.json")
	r := run(t, "doctor", "--json", "-o", out, "--", bin, "-l", "spin", "-t", "6", "-d", "1.5")
	if r.code != 0 {
		t.Fatalf("doctor exited %d: %s", r.code, r.stderr)
	}
	m := regexp.MustCompile(`lock=(0x[0-9a-f]+).* futex_waits=(\d+) futex_again=(\d+) futex_wakes=(\d+) futex_woke=(\d+)`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no counts from the program: %q", r.stdout)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep doctorReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	var f *finding
	for i := range rep.Findings {
		if rep.Findings[i].ID == "lock-convoy" && rep.Findings[i].Evidence["address"] == m[1] {
			f = &rep.Findings[i]
		}
	}
	if f == nil {
		t.Fatalf("no lock-convoy on %s (the program made %s waits):\n%s", m[1], m[2], titles(rep))
	}
	for i, k := range []string{"waits", "waits_word_changed", "wakes", "threads_woken"} {
		want, _ := strconv.ParseUint(m[2+i], 10, 64)
		got, _ := f.Evidence[k].(float64)
		if uint64(got) != want {
			t.Errorf("%s = %v, the program counted %d", k, f.Evidence[k], want)
		}
	}
	// Every wait that slept ended by a wake (the program sets no timeout),
	// and only a wait that did not find the word changed can sleep. How
	// many of those did is the machine's: a wake that comes between the
	// waiter's queueing and its switch-out returns it without a sleep,
	// which a quiet host with fast hand-offs sees more (a fifth of the
	// waits in one CI run) than a loaded one.
	slept, _ := f.Evidence["waits_slept"].(float64)
	woken, _ := f.Evidence["waits_woken"].(float64)
	waits, _ := f.Evidence["waits"].(float64)
	again, _ := f.Evidence["waits_word_changed"].(float64)
	if slept != woken || slept > waits-again || slept == 0 {
		t.Errorf("slept %v, woken %v, of %v waits, %v of which found the word changed", slept, woken, waits, again)
	}
	if n, _ := f.Evidence["threads_waiting"].(float64); n != 6 {
		t.Errorf("threads waiting %v, want 6", n)
	}
}

// Benign cousins: workers parked on a condition variable, and a Go program
// whose idle threads park in futex, do not make a lock-convoy warning.
func TestLockConvoyBenign(t *testing.T) {
	requireBPF(t)
	bins := map[string][]string{
		"idle-pool": {scenarioBin(t, "lockconvoy"), "-m", "idle", "-i", "10", "-t", "16", "-d", "2"},
		"go-idle":   {scenarioBin(t, "goidle"), "-threads", "32", "-every", "2ms", "-d", "2s"},
	}
	for name, argv := range bins {
		t.Run(name, func(t *testing.T) {
			rep := doctorCmd(t, 0, argv...)
			for _, f := range rep.Findings {
				if f.ID == "lock-convoy" && f.Severity != "info" {
					t.Errorf("%s on %s: %s\n%s", f.Severity, name, f.Title, fmt.Sprint(f.Evidence))
				}
			}
		})
	}
}

// A capture made with record --stacks keeps the kernel's futex sums, so
// doctor -r finds the convoy as the live doctor does.
func TestLockConvoyFromCapture(t *testing.T) {
	requireBPF(t)
	bin := scenarioBin(t, "lockconvoy")
	capture := filepath.Join(t.TempDir(), "c.sysray")
	if r := run(t, "record", "--stacks", "-w", capture, "--", bin, "-l", "rwlock", "-d", "1.5"); r.code != 0 {
		t.Fatalf("record exited %d: %s", r.code, r.stderr)
	}
	out := filepath.Join(t.TempDir(), "report.json")
	if r := run(t, "doctor", "-r", capture, "--json", "-o", out); r.code != 0 {
		t.Fatalf("doctor -r exited %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep doctorReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.ID == "lock-convoy" && f.Severity == "warning" {
			if n, _ := f.Evidence["threads_waiting"].(float64); n != 8 {
				t.Errorf("threads waiting %v, want 8", n)
			}
			return
		}
	}
	t.Fatalf("no lock-convoy warning from the capture:\n%s", titles(rep))
}
