// Command emptytp attaches two BPF programs that do nothing, as tp_btf
// programs on sys_enter and sys_exit, until interrupted: the cost of
// having the syscall tracepoints on at all, which no tool that attaches
// there can go under (bench/redis.sh, bench/peers.sh).
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

func main() {
	for _, tp := range []string{"sys_enter", "sys_exit"} {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: tp, License: "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
		})
		if err != nil {
			fmt.Fprintf(os.Stderr, "emptytp: loading for %s: %v\n", tp, err)
			os.Exit(1)
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: prog})
		if err != nil {
			fmt.Fprintf(os.Stderr, "emptytp: attaching to %s: %v\n", tp, err)
			os.Exit(1)
		}
		defer l.Close()
	}
	fmt.Fprintln(os.Stderr, "emptytp: attached")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
