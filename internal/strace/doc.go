// Package strace reads the text strace writes (strace -f -ttt -T -o LOG, and
// the -ff per-process files) and turns it into sysray events, so that a
// capture can be made where eBPF is not allowed.
//
// strace sees less than the kernel probes: no stacks, no page faults, no
// cgroups, no CPU, no signal generation apart from its delivery, and only
// the arguments it chose to print. The conversion keeps what strace printed
// and never fills in the rest: what is missing stays zero, and Absent lists
// it so that a capture can say so in its header.
//
// A line is parsed on its own (Parse); a Converter then pairs a call's
// "<unfinished ...>" half with its "<... resumed>" half per thread, follows
// clone, execve and exits to know each thread's process and name, and
// produces the events in the order strace saw calls complete, as the live
// probe does.
package strace
