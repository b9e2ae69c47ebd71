// Command jitlines prints where each source line of a process's BPF
// programs begins in their JIT images: one line per line-info record, the
// kernel address in hex, then file:line and the source text. With perf's
// samples of kernel addresses (bench/bpflines.sh), it says which lines of
// the hot path the time goes to, without a PMU or a perf built with the
// BPF disassembler.
//
//	jitlines PID
package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: jitlines PID")
		os.Exit(2)
	}
	ids, err := progIDs(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "jitlines:", err)
		os.Exit(1)
	}
	if len(ids) == 0 {
		fmt.Fprintf(os.Stderr, "jitlines: process %s holds no BPF program\n", os.Args[1])
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for _, id := range ids {
		if err := dump(w, id); err != nil {
			fmt.Fprintf(os.Stderr, "jitlines: program %d: %v\n", id, err)
		}
	}
}

// progIDs reads the ids of the programs pid holds open, from its fds' fdinfo.
func progIDs(pid string) ([]ebpf.ProgramID, error) {
	fds, err := os.ReadDir(filepath.Join("/proc", pid, "fdinfo"))
	if err != nil {
		return nil, err
	}
	seen := map[ebpf.ProgramID]bool{}
	var ids []ebpf.ProgramID
	for _, fd := range fds {
		b, err := os.ReadFile(filepath.Join("/proc", pid, "fdinfo", fd.Name()))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			v, ok := strings.CutPrefix(l, "prog_id:")
			if !ok {
				continue
			}
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err == nil && !seen[ebpf.ProgramID(n)] {
				seen[ebpf.ProgramID(n)] = true
				ids = append(ids, ebpf.ProgramID(n))
			}
		}
	}
	return ids, nil
}

func dump(w *bufio.Writer, id ebpf.ProgramID) error {
	p, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return err
	}
	defer p.Close()
	info, err := p.Info()
	if err != nil {
		return err
	}
	jited, _ := info.JitedLineInfos()
	lines, err := info.LineInfos()
	if err != nil {
		return err
	}
	for i, l := range lines {
		if i >= len(jited) {
			break
		}
		fmt.Fprintf(w, "%x %s %s:%d %s\n", jited[i], info.Name, filepath.Base(l.Line.FileName()), l.Line.LineNumber(), strings.TrimSpace(l.Line.Line()))
	}
	return nil
}
