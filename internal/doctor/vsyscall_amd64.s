#include "textflag.h"

// func vsyscallTime() int64
TEXT ·vsyscallTime(SB),NOSPLIT,$0-8
	MOVQ $0, DI
	MOVQ $0xffffffffff600400, AX
	CALL AX
	MOVQ AX, ret+0(FP)
	RET

// func callTime(fn uintptr) int64
TEXT ·callTime(SB),NOSPLIT,$0-16
	MOVQ fn+0(FP), AX
	MOVQ SP, BX
	ANDQ $~15, SP
	MOVQ $0, DI
	CALL AX
	MOVQ BX, SP
	MOVQ AX, ret+8(FP)
	RET
