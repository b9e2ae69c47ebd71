package probe

// The BPF object is generated from bpf/sysray.bpf.c and committed, so a plain
// `go build` needs no clang. `make generate` runs this.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags ${BPF_CFLAGS} -target amd64 -type hdr -type sys_rec -type sleeps -type fault_rec -type vsys_rec -type sig_rec -type fork_rec -type exec_rec -type exit_rec -type recent_rec -type reclaim_rec -type runq_rec -type fw_rec -type blocked_rec -type kind -type hdr_flag -type cap_kind -type dns_class sysray ../../bpf/sysray.bpf.c -- -I../../bpf
