module github.com/sysray/sysray

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	golang.org/x/sys v0.43.0 // indirect
)
