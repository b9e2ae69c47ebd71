package host

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/proc"
)

// userHZ is the unit of /proc/stat's times (USER_HZ, which the kernel
// fixes at 100 for user space on every architecture sysray runs on,
// whatever CONFIG_HZ is).
const userHZ = 100

// Steal returns each CPU's steal time in ns, indexed by CPU number: time
// this guest's virtual CPU was runnable while the hypervisor ran something
// else. A thread on that CPU sees its clock move and its work stand still,
// without a context switch the guest could trace. Zero on bare metal.
func Steal() ([]uint64, error) {
	b, err := proc.ReadFile("/proc/stat")
	if err != nil {
		return nil, err
	}
	return parseSteal(bufio.NewScanner(bytes.NewReader(b))), nil
}

func parseSteal(sc *bufio.Scanner) []uint64 {
	var out []uint64
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "cpu") || len(line) < 4 || line[3] < '0' || line[3] > '9' {
			if len(out) > 0 && !strings.HasPrefix(line, "cpu") {
				break // the cpu lines come first, together
			}
			continue
		}
		f := strings.Fields(line)
		cpu, err := strconv.Atoi(f[0][3:])
		if err != nil || cpu < 0 || cpu > 1<<16 || len(f) < 9 {
			continue
		}
		ticks, err := strconv.ParseUint(f[8], 10, 64)
		if err != nil {
			continue
		}
		for len(out) <= cpu {
			out = append(out, 0)
		}
		out[cpu] = ticks * (1e9 / userHZ)
	}
	return out
}
