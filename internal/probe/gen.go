package probe

// The BPF object is generated from bpf/sysray.bpf.c and committed, so a plain
// `go build` needs no clang. `make generate` runs this.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags ${BPF_CFLAGS} -target amd64 sysray ../../bpf/sysray.bpf.c -- -I../../bpf
