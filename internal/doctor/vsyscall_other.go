//go:build !amd64

package doctor

const haveVsyscallCall = false

func vsyscallTime() int64 { return 0 }

func vdsoTime() (uintptr, bool) { return 0, false }
func callTime(uintptr) int64    { return 0 }
