package host

import (
	"bufio"
	"compress/gzip"
	"io"
	"os"
	"strconv"
	"strings"
)

// HZ is the kernel's tick rate (CONFIG_HZ), from its build configuration in
// /boot or /proc/config.gz; 0 when neither is there.
func HZ() int {
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
