package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sysray/sysray/internal/checkup"
	"github.com/sysray/sysray/internal/doctor"
	"github.com/sysray/sysray/internal/doctor/render"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/session"
	"github.com/sysray/sysray/scenarios/variants"
)

// variantResult is one variant's outcome in `demo --variants --json`.
type variantResult struct {
	Differs string         `json:"differs"`
	Mode    variants.Mode  `json:"mode"`
	Expect  string         `json:"expect"`
	Pass    bool           `json:"pass"`
	Error   string         `json:"error,omitempty"`
	Report  *doctor.Report `json:"report,omitempty"`
}

// runVariants runs the variants that match pattern under the doctor and
// says which found what they expect.
func runVariants(pattern, dir string, asJSON bool) error {
	vs, err := variants.Match(pattern)
	if err != nil {
		return err
	}
	if err := buildScenarios(dir); err != nil {
		return err
	}
	bin, err := filepath.Abs(filepath.Join(dir, "bin"))
	if err != nil {
		return err
	}
	results := map[string]*variantResult{}
	var failed []string
	for _, v := range vs {
		if !asJSON {
			// Stop at once if no one can read what the variants say.
			if _, err := fmt.Printf("\n==== variant %s (%s): %s\n", v.Name, v.Mode, v.Differs); err != nil {
				return err
			}
		}
		res := &variantResult{Differs: v.Differs, Mode: v.Mode, Expect: v.Expect.String()}
		results[v.Name] = res
		rep, err := runVariant(v, bin, dir)
		if err == nil {
			res.Report = rep
			_, err = v.Check(rep)
		}
		res.Pass = err == nil
		if err != nil {
			res.Error = err.Error()
			failed = append(failed, v.Name)
		}
		if !asJSON {
			var werr error
			if rep != nil {
				werr = render.Text(os.Stdout, rep, false)
			}
			if err != nil {
				_, err = fmt.Printf("FAIL %v\n", err)
			} else {
				_, err = fmt.Printf("PASS %s: %s\n", v.Name, v.Expect)
			}
			if werr != nil {
				return werr
			}
			if err != nil {
				return err
			}
		}
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return err
		}
	} else if _, err := fmt.Printf("\nsysray demo --variants: %d passed, %d failed\n", len(vs)-len(failed), len(failed)); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("variants without their expected finding: %s", strings.Join(failed, ", "))
	}
	return nil
}

// runVariant runs one variant's workload and the doctor the way the variant
// says: around the command, or after the workload has started.
func runVariant(v variants.Variant, bin, dir string) (*doctor.Report, error) {
	tmp, err := os.MkdirTemp("", "sysray-variant-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if v.Container != nil {
		return runInContainer(v, bin, dir, tmp)
	}
	if v.Mode == variants.InContainer {
		return nil, fmt.Errorf("variant %s: --container needs a container to trace", v.Name)
	}
	argv := make([]string, len(v.Argv))
	for i, a := range v.Argv {
		argv[i] = strings.ReplaceAll(a, "{tmp}", tmp)
	}
	argv[0] = filepath.Join(bin, argv[0])
	if len(v.Neighbour) > 0 {
		stop, err := startNeighbour(filepath.Join(bin, v.Neighbour[0]), v.Neighbour[1:])
		if err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.Name, err)
		}
		defer stop()
	}
	sel := session.Selection{Stacks: true, Slow: time.Duration(event.DefaultSlow)}
	if v.Mode == variants.Cmd {
		if len(v.Without) > 0 {
			return nil, fmt.Errorf("variant %s: only a workload started before sysray can keep the capabilities sysray goes without", v.Name)
		}
		rep, _, err := checkup.Live(&sel, argv, os.Stderr)
		return rep, err
	}
	w := exec.Command(argv[0], argv[1:]...)
	w.Stdout, w.Stderr = os.Stderr, os.Stderr
	// A process group of its own: what it started is waited for too.
	w.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- w.Wait() }()
	defer func() {
		// The workload may outlive the trace; it is asked to stop (the
		// scenarios restore what they changed on SIGTERM), then killed.
		w.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			w.Process.Kill()
			<-exited
		}
		drainGroup(w.Process.Pid)
	}()
	time.Sleep(v.Lead)
	sel.Duration = v.For
	if v.Mode == variants.PID {
		sel.PIDs = []int{w.Process.Pid}
		sel.Children = true
	}
	var rep *doctor.Report
	err = withoutCaps(v.Without, func() (err error) {
		rep, _, err = checkup.Live(&sel, nil, os.Stderr)
		return err
	})
	return rep, err
}

// runInContainer runs a variant's workload in a container that
// tests/containers/setup.sh starts (a real containerd and runc), traces it
// the way the variant's mode says, and removes the container however the
// run ends.
func runInContainer(v variants.Variant, bin, dir, tmp string) (*doctor.Report, error) {
	if v.Mode == variants.Cmd || len(v.Without) > 0 || len(v.Neighbour) > 0 {
		return nil, fmt.Errorf("variant %s: a container's workload is started before sysray, alone, with all its capabilities", v.Name)
	}
	scripts, err := filepath.Abs(filepath.Join(dir, "..", "tests", "containers"))
	if err != nil {
		return nil, err
	}
	name := v.ContainerName()
	args := []string{filepath.Join(scripts, "setup.sh"), "run",
		"--mount", bin + ":" + variants.BinDir + ":ro", "--mount", tmp + ":" + variants.TmpDir}
	if v.Container.ReadOnly {
		args = append(args, "--read-only")
	}
	if v.Container.Privileged {
		args = append(args, "--privileged")
	}
	args = append(args, name, "variants", "sysray", name, "--")
	for i, a := range v.Argv {
		a = strings.ReplaceAll(a, "{tmp}", variants.TmpDir)
		a = strings.ReplaceAll(a, "{bin}", variants.BinDir)
		if i == 0 && !filepath.IsAbs(a) {
			a = path.Join(variants.BinDir, a)
		}
		args = append(args, a)
	}
	for _, k := range v.Container.Sysctls {
		was, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return nil, fmt.Errorf("variant %s: %w", v.Name, err)
		}
		// Runs after the teardown below: deferred first.
		defer func() {
			if err := os.WriteFile(filepath.Join("/proc/sys", k), was, 0); err != nil {
				fmt.Fprintf(os.Stderr, "variant %s: putting back %s: %v\n", v.Name, k, err)
			}
		}()
	}
	defer func() {
		if out, err := exec.Command("bash", filepath.Join(scripts, "teardown.sh"), name).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "variant %s: teardown.sh: %v\n%s", v.Name, err, out)
		}
	}()
	start := exec.Command("bash", args...)
	start.Stderr = os.Stderr
	out, err := start.Output()
	if err != nil {
		return nil, fmt.Errorf("variant %s: starting its container (tests/containers/setup.sh): %w", v.Name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return nil, fmt.Errorf("variant %s: setup.sh printed %q, want the container's pid", v.Name, out)
	}
	time.Sleep(v.Lead)
	sel := session.Selection{Stacks: true, Slow: time.Duration(event.DefaultSlow), Duration: v.For}
	switch v.Mode {
	case variants.PID:
		sel.PIDs = []int{pid}
		sel.Children = true
	case variants.InContainer:
		sel.Containers = []string{name}
	}
	rep, _, err := checkup.Live(&sel, nil, os.Stderr)
	return rep, err
}

// startNeighbour starts a variant's neighbour and returns what kills it. It
// is given a moment to get going: a neighbour still allocating its buffers
// is not yet the busy host the variant is about.
func startNeighbour(path string, args []string) (stop func(), err error) {
	n := exec.Command(path, args...)
	n.Stdout, n.Stderr = os.Stderr, os.Stderr
	if err := n.Start(); err != nil {
		return nil, fmt.Errorf("starting the neighbour %s: %w", path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- n.Wait() }()
	select {
	case err := <-exited:
		return nil, fmt.Errorf("the neighbour %s exited at once: %v", path, err)
	case <-time.After(500 * time.Millisecond):
	}
	return func() {
		n.Process.Kill()
		<-exited
	}, nil
}

// drainGroup waits until every process of the group pgid is gone, reaped
// too, and kills what is left after groupGrace. A workload's children die
// after it, on their own (PR_SET_PDEATHSIG, a janitor restoring what it
// changed), and until they are reaped they still count: nprocfill -p 2's
// hundreds of threads of uid 65534 against the next variant's
// RLIMIT_NPROC, whose fill then never reached its limit as they went
// (CI once saw cgroup-limit/nproc-cgroup find nothing after nproc-host).
func drainGroup(pgid int) {
	killed := false
	deadline := time.Now().Add(groupGrace)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			if killed {
				fmt.Fprintf(os.Stderr, "sysray: processes of the workload's group %d are still there %s after SIGKILL\n", pgid, groupGrace)
				return
			}
			syscall.Kill(-pgid, syscall.SIGKILL)
			killed, deadline = true, time.Now().Add(groupGrace)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// groupGrace: a janitor restores settings in well under a second; a
// workload's children stopping take less.
const groupGrace = 10 * time.Second
