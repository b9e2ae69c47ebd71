package doctor

const haveVsyscallCall = true

// vsyscallTime calls time(NULL) at 0xffffffffff600400, as glibc before 2.14 did.
func vsyscallTime() int64
