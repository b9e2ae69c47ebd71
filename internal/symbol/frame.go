package symbol

import "strconv"

// Frame is one resolved stack address.
type Frame struct {
	Addr uint64
	Func string // demangled; "" when unknown
	// Offset is Addr minus the start of Func. When Func is "" but the
	// address is in a known ELF file, it is the address in that file's own
	// link-time address space, which addr2line and gdb take.
	Offset uint64
	// File is the object as the process sees it (/usr/lib/x86_64-linux-gnu/libc.so.6),
	// [vdso], [vsyscall], [anon] (anonymous executable memory), a perf map
	// path, KernelFile or [module] for the kernel, or Unknown.
	File   string
	Kernel bool
}

// Unknown is Frame.File for addresses outside anything we know.
const Unknown = "[unknown]"

// String formats the frame as perf does: func+0xoff (file).
func (f Frame) String() string {
	name := f.Func
	if name == "" {
		name = "0x" + strconv.FormatUint(f.Addr, 16)
	} else if f.Offset != 0 {
		name += "+0x" + strconv.FormatUint(f.Offset, 16)
	}
	if f.File == "" {
		return name
	}
	return name + " (" + f.File + ")"
}
