// Command tpmicro prices BPF building blocks on the syscall tracepoints:
// it attaches sets of small tp_btf programs from an object built from
// bpf/micro.bpf.c (one helper call or map kind each), one set at a time,
// interleaved over rounds, and prints the median of what a workload
// command prints under each set (ns per call for a getppid loop, requests
// a second for redis-benchmark), with its change against no programs.
//
//	clang-19 -O2 -g -target bpf -D__TARGET_ARCH_x86 -I bpf -c bench/tpmicro/bpf/micro.bpf.c -o /tmp/micro.o
//	go run ./bench/tpmicro /tmp/micro.o 7 "/tmp/loop 2000000" base en_empty+ex_empty en_tscreate+ex_tshit
//
// A set is "base" (nothing attached) or program names joined by "+".
// Needs root. Used to find where stat's per-call cost goes (bench/HISTORY.md).
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tpmicro:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 4 {
		return errors.New("usage: tpmicro OBJECT ROUNDS COMMAND SET (SET: base, or program names joined by +)")
	}
	spec, err := ebpf.LoadCollectionSpec(args[0])
	if err != nil {
		return err
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return err
	}
	defer coll.Close()
	rounds, err := strconv.Atoi(args[1])
	if err != nil || rounds < 1 {
		return fmt.Errorf("rounds %q: want a positive number", args[1])
	}
	workload, sets := args[2], args[3:]
	res := map[string][]float64{}
	for r := 0; r < rounds; r++ {
		for _, set := range sets {
			v, err := measure(coll, set, workload)
			if err != nil {
				return err
			}
			res[set] = append(res[set], v)
		}
	}
	base := median(res["base"])
	for _, set := range sets {
		m := median(res[set])
		fmt.Printf("%-28s %9.1f  %+9.1f\n", set, m, m-base)
	}
	return nil
}

// measure runs the workload once with set attached and returns what it printed.
func measure(coll *ebpf.Collection, set, workload string) (float64, error) {
	if set != "base" {
		for _, name := range strings.Split(set, "+") {
			p := coll.Programs[name]
			if p == nil {
				return 0, fmt.Errorf("no program %q in the object", name)
			}
			l, err := link.AttachTracing(link.TracingOptions{Program: p})
			if err != nil {
				return 0, fmt.Errorf("attaching %s: %w", name, err)
			}
			defer l.Close()
		}
	}
	out, err := exec.Command("sh", "-c", workload).Output()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", workload, err)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		return 0, fmt.Errorf("%s printed %q, not a number", workload, out)
	}
	return v, nil
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	y := append([]float64(nil), x...)
	sort.Float64s(y)
	return y[len(y)/2]
}
