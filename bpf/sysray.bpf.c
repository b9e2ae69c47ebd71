// SPDX-License-Identifier: GPL-2.0
/*
 * sysray's kernel half: one record per completed syscall, plus the page
 * faults, vsyscall emulations, signals and process lifecycle events that
 * explain why a program died or slowed down.
 *
 * Cost model: without sleep stacks a syscall costs an array lookup at entry
 * and at exit (fast.h), and an unselected one nothing more once its thread's
 * row knows it; with them, task storage lookups at entry and exit.
 * Selection (pids, cgroups, syscalls, minimum latency) is decided here so
 * nothing unwanted crosses to user space.
 *
 * Verification is a cost too: sysray verifies its programs at every start,
 * and the kernel refuses a program whose walk passes a million
 * instructions. Values that branch (an error code, a mode) should not stay
 * live to the end of the inlined helpers that see them, or the verifier
 * walks every branch to the end: stat's sys_exit once walked 864,120
 * instructions for a map key chosen from err. tests/verifier_test.go holds
 * every command's programs to half the kernel's limit.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "sysray.h"

char LICENSE[] SEC("license") = "GPL";

#include "config.h"
#include "state.h"
#include "maps.h"
#include "stacks.h"
#include "select.h"
#include "dnswatch.h"
#include "emit.h"
#include "stat.h"
#include "fast.h"
#include "faultwait.h"
#include "runq.h"
#include "sleep.h"
#include "futex.h"
#include "syscalls.h"
#include "faults.h"
#include "signals.h"
#include "lifecycle.h"
#include "reclaim.h"
#include "profile.h"
