package host

import (
	"bufio"
	"compress/gzip"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// HZ is the kernel's tick rate (CONFIG_HZ); 0 when it cannot be told.
//
// The coarse clocks tick once a jiffy, and the kernel gives their
// resolution as the jiffy's length (TICK_NSEC, 1e9/HZ rounded), so one
// syscall answers without opening a file: on a host whose audit backlog is
// full every open may wait, and the doctor reads this before it traces. The
// kernel's build configuration (/boot, /proc/config.gz) is the fallback.
func HZ() int {
	if hz := tickHZ(); hz > 0 {
		return hz
	}
	return configFileHZ()
}

// tickHZ derives HZ from the resolution of CLOCK_MONOTONIC_COARSE.
func tickHZ() int {
	var ts unix.Timespec
	if err := unix.ClockGetres(unix.CLOCK_MONOTONIC_COARSE, &ts); err != nil {
		return 0
	}
	return hzOfTick(ts.Nano())
}

// hzOfTick is the HZ whose TICK_NSEC ((1e9 + HZ/2) / HZ) is tick, or 0 when
// tick is not a jiffy (a high-resolution answer, or none).
func hzOfTick(tick int64) int {
	if tick < 100_000 || tick > 100_000_000 { // HZ 10 to 10000
		return 0
	}
	hz := int((1e9 + tick/2) / tick)
	if (1e9+int64(hz)/2)/int64(hz) != tick {
		return 0
	}
	return hz
}

// configFileHZ reads CONFIG_HZ from /boot/config-RELEASE or /proc/config.gz.
func configFileHZ() int {
	_, release := Uname()
	release, _, _ = strings.Cut(release, " ")
	if f, err := os.Open("/boot/config-" + release); err == nil {
		defer f.Close()
		return configHZ(f)
	}
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return 0
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return 0
	}
	return configHZ(z)
}

func configHZ(r io.Reader) int {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CONFIG_HZ="); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}
