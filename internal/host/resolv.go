package host

import (
	"os"
	"strings"
)

// MetaResolvConf is the capture header's copy of the recorder's
// /etc/resolv.conf (its nameserver, search, domain and options lines,
// joined by "; "): what a resolver on the host waits by. A process in
// another mount namespace (a container) reads its own file, which the
// doctor reads live from /proc/PID/root and a capture does not hold.
const MetaResolvConf = "resolv.conf"

// ResolvConf reads path's resolver settings in MetaResolvConf's form; ""
// when it cannot be read or says nothing.
func ResolvConf(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var kept []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver", "search", "domain", "options":
			kept = append(kept, strings.Join(f, " "))
		}
	}
	return strings.Join(kept, "; ")
}
