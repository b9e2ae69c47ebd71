package scap

import "github.com/sysray/sysray/internal/event"

// The tracer stores flag arguments in its own bits (PPM_O_*, PPM_PROT_*,
// PPM_MAP_*, PPM_CL_* in falcosecurity/libs driver/ppm_events_public.h,
// converted from the kernel's in driver/ppm_flag_helpers.h). These tables
// pair each with the x86-64 Linux value; the bits are the same at libs
// e5c53d64 (the writer's schema) and 48dfd53c (the reader's). A Linux
// flag scap has no bit for is lost on export, and a scap bit with no
// Linux value on x86-64 (PPM_MAP_RENAME, PPM_MAP_INHERIT, PPM_PROT_SAO,
// PPM_O_F_CREATED) is dropped on import.
type flagBit struct{ linux, ppm uint64 }

// openFlagBits leaves out the access mode (scap has a bit for O_RDONLY,
// Linux's 0) and the bits the tracer sets ambiguously: its O_SYNC and
// O_TMPFILE tests are bit-and against masks that include O_DSYNC and
// O_DIRECTORY, so every O_DSYNC open has PPM_O_SYNC and every
// O_DIRECTORY open PPM_O_TMPFILE. Those two are written but not read.
var openFlagBits = []flagBit{
	{0o100, 1 << 2},      // O_CREAT
	{0o2000, 1 << 3},     // O_APPEND
	{0o10000, 1 << 4},    // O_DSYNC
	{0o200, 1 << 5},      // O_EXCL
	{0o4000, 1 << 6},     // O_NONBLOCK
	{0o1000, 1 << 8},     // O_TRUNC
	{0o40000, 1 << 9},    // O_DIRECT
	{0o200000, 1 << 10},  // O_DIRECTORY
	{0o100000, 1 << 11},  // O_LARGEFILE
	{0o2000000, 1 << 12}, // O_CLOEXEC
}

const (
	ppmORdonly    = 1 << 0
	ppmOWronly    = 1 << 1
	ppmOSync      = 1 << 7
	ppmOTmpfile   = 1 << 13
	linuxOSync    = 0o4000000  // __O_SYNC (O_SYNC is it with O_DSYNC)
	linuxOTmpfile = 0o20000000 // __O_TMPFILE (O_TMPFILE is it with O_DIRECTORY)
)

var protBits = []flagBit{
	{0x1, 1 << 0},        // PROT_READ
	{0x2, 1 << 1},        // PROT_WRITE
	{0x4, 1 << 2},        // PROT_EXEC
	{0x8, 1 << 3},        // PROT_SEM
	{0x01000000, 1 << 4}, // PROT_GROWSDOWN
	{0x02000000, 1 << 5}, // PROT_GROWSUP
}

var mmapBits = []flagBit{
	{0x01, 1 << 0},    // MAP_SHARED
	{0x02, 1 << 1},    // MAP_PRIVATE
	{0x10, 1 << 2},    // MAP_FIXED
	{0x20, 1 << 3},    // MAP_ANONYMOUS
	{0x40, 1 << 4},    // MAP_32BIT
	{0x4000, 1 << 6},  // MAP_NORESERVE
	{0x8000, 1 << 7},  // MAP_POPULATE
	{0x10000, 1 << 8}, // MAP_NONBLOCK
	{0x100, 1 << 9},   // MAP_GROWSDOWN
	{0x800, 1 << 10},  // MAP_DENYWRITE
	{0x1000, 1 << 11}, // MAP_EXECUTABLE
	{0x2000, 1 << 14}, // MAP_LOCKED
}

// cloneBits has no exit signal (the low byte of clone's flags): scap
// does not keep it.
var cloneBits = []flagBit{
	{0x400, 1 << 0},       // CLONE_FILES
	{0x200, 1 << 1},       // CLONE_FS
	{0x80000000, 1 << 2},  // CLONE_IO
	{0x08000000, 1 << 3},  // CLONE_NEWIPC
	{0x40000000, 1 << 4},  // CLONE_NEWNET
	{0x20000, 1 << 5},     // CLONE_NEWNS
	{0x20000000, 1 << 6},  // CLONE_NEWPID
	{0x04000000, 1 << 7},  // CLONE_NEWUTS
	{0x8000, 1 << 8},      // CLONE_PARENT
	{0x100000, 1 << 9},    // CLONE_PARENT_SETTID
	{0x2000, 1 << 10},     // CLONE_PTRACE
	{0x800, 1 << 11},      // CLONE_SIGHAND
	{0x40000, 1 << 12},    // CLONE_SYSVSEM
	{0x10000, 1 << 13},    // CLONE_THREAD
	{0x800000, 1 << 14},   // CLONE_UNTRACED
	{0x100, 1 << 15},      // CLONE_VM
	{0x10000000, 1 << 20}, // CLONE_NEWUSER
	{0x200000, 1 << 23},   // CLONE_CHILD_CLEARTID
	{0x1000000, 1 << 24},  // CLONE_CHILD_SETTID
	{0x80000, 1 << 25},    // CLONE_SETTLS
	{0x4000, 1 << 27},     // CLONE_VFORK
	{0x02000000, 1 << 28}, // CLONE_NEWCGROUP
}

func bitsToScap(v uint64, t []flagBit) uint64 {
	var r uint64
	for _, b := range t {
		if v&b.linux == b.linux {
			r |= b.ppm
		}
	}
	return r
}

func bitsToLinux(v uint64, t []flagBit) uint64 {
	var r uint64
	for _, b := range t {
		if v&b.ppm != 0 {
			r |= b.linux
		}
	}
	return r
}

func openToScap(v uint64) uint64 {
	r := bitsToScap(v, openFlagBits)
	switch v & 3 {
	case 0:
		r |= ppmORdonly
	case 1:
		r |= ppmOWronly
	default:
		r |= ppmORdonly | ppmOWronly
	}
	if v&linuxOSync != 0 {
		r |= ppmOSync
	}
	if v&linuxOTmpfile != 0 {
		r |= ppmOTmpfile
	}
	return r
}

func openToLinux(v uint64) uint64 {
	r := bitsToLinux(v, openFlagBits)
	switch v & (ppmORdonly | ppmOWronly) {
	case ppmOWronly:
		r |= 1 // O_WRONLY
	case ppmORdonly | ppmOWronly:
		r |= 2 // O_RDWR
	}
	return r
}

// flagConv is how an argument of this kind goes between the two: nil
// for the kinds scap stores as the kernel's value.
func flagConv(k event.ArgKind) (toScap, toLinux func(uint64) uint64) {
	table := func(t []flagBit) (func(uint64) uint64, func(uint64) uint64) {
		return func(v uint64) uint64 { return bitsToScap(v, t) }, func(v uint64) uint64 { return bitsToLinux(v, t) }
	}
	switch k {
	case event.ArgOpenFlags:
		return openToScap, openToLinux
	case event.ArgProt:
		return table(protBits)
	case event.ArgMapFlags:
		return table(mmapBits)
	case event.ArgCloneFlags:
		return table(cloneBits)
	case event.ArgSockFamily:
		// PPM_AF_* are the Linux address family numbers.
		id := func(v uint64) uint64 { return v }
		return id, id
	}
	return nil, nil
}
