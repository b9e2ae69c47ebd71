package doctor

// A process's resolv.conf, as its resolver reads it: shared by the DNS
// detectors.

import (
	"os"
	"strconv"
	"strings"

	hostfacts "github.com/sysray/sysray/internal/host"
)

// resolvConf is what a process's resolver waits and searches by.
type resolvConf struct {
	from        string // where it was read
	nameservers []string
	options     string // the options line(s), and RES_OPTIONS
	timeout     int    // seconds (5 unless set)
	attempts    int    // 2 unless set
	ndots       int    // 1 unless set
	search      []string
}

// readResolvConf reads the resolver settings a live process sees: the
// resolv.conf in its own root (its container's, or its mount
// namespace's), and RES_OPTIONS from its environment, which glibc
// applies over the file. nil when the file cannot be read.
func readResolvConf(pid uint32) *resolvConf {
	dir := "/proc/" + strconv.FormatUint(uint64(pid), 10)
	text := hostfacts.ResolvConf(dir + "/root/etc/resolv.conf")
	if text == "" {
		return nil
	}
	c := parseResolvConf(text)
	c.from = dir + "/root/etc/resolv.conf"
	if env, err := os.ReadFile(dir + "/environ"); err == nil {
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "RES_OPTIONS="); ok && strings.TrimSpace(v) != "" {
				c.applyOptions(strings.Fields(v))
				c.options = strings.TrimSpace(c.options + " " + v + " (RES_OPTIONS)")
				c.from += " and RES_OPTIONS"
			}
		}
	}
	return c
}

// parseResolvConf reads hostfacts.ResolvConf's form ("nameserver X;
// options timeout:1 ...").
func parseResolvConf(text string) *resolvConf {
	c := &resolvConf{timeout: 5, attempts: 2, ndots: 1}
	for _, line := range strings.Split(text, "; ") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			c.nameservers = append(c.nameservers, f[1])
		case "search", "domain": // the last of them wins, as in glibc
			c.search = append([]string(nil), f[1:]...)
		case "options":
			c.applyOptions(f[1:])
			c.options = strings.TrimSpace(c.options + " " + strings.Join(f[1:], " "))
		}
	}
	return c
}

func (c *resolvConf) applyOptions(opts []string) {
	for _, o := range opts {
		k, v, _ := strings.Cut(o, ":")
		n, err := strconv.Atoi(v)
		switch {
		case k == "timeout" && err == nil:
			c.timeout = min(max(n, 1), 30) // glibc's RES_MAXRETRANS
		case k == "attempts" && err == nil:
			c.attempts = min(max(n, 1), 5) // glibc's RES_MAXRETRY
		case k == "ndots" && err == nil:
			c.ndots = min(max(n, 0), 15) // glibc's RES_MAXNDOTS
		}
	}
}
