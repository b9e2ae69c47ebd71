// Command goresolve looks names up with Go's own resolver (built with
// CGO_ENABLED=0, so the runtime reads resolv.conf and sends the queries
// itself): the resolver scenario's worker for Go programs. Run by
// `resolver -x goresolve`, which makes the namespaces, the name server
// and resolv.conf; each lookup is net.DefaultResolver.LookupHost (A and
// AAAA, in parallel goroutines), or LookupIP("ip4") with -c getaddrinfo.
//
// usage: goresolve [-id N] [-n LOOKUPS] [-d DURATION] [-c unspec|getaddrinfo] [-i PAUSE]
//
// Prints each lookup as the C scenario does ("lookup PID I NAME: MS ms,
// RESULT") and, at the end, RESULT procs=1 lookups=... failed=...
// total_ms=... max_ms=...
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	id := flag.Int("id", 0, "the worker's number, in the names")
	n := flag.Int("n", 3, "lookups; 0: until -d is up")
	d := flag.Duration("d", 20*time.Second, "stop after this long whatever -n says")
	call := flag.String("c", "unspec", "unspec: LookupHost (A and AAAA); getaddrinfo: LookupIP ip4 (A only)")
	pause := flag.Duration("i", 0, "pause between lookups")
	fixed := flag.String("name", "", "look this name up each time (svc-ID-I.sysray.test: a new name each)")
	flag.Parse()

	stop := time.Now().Add(*d)
	var lookups, failed int
	var total, most float64
	for i := 0; (*n == 0 || i < *n) && time.Now().Before(stop); i++ {
		name := fmt.Sprintf("svc-%d-%d.sysray.test", *id, i)
		if *fixed != "" {
			name = *fixed
		}
		t0 := time.Now()
		var err error
		if *call == "getaddrinfo" {
			_, err = net.DefaultResolver.LookupIP(context.Background(), "ip4", name)
		} else {
			_, err = net.DefaultResolver.LookupHost(context.Background(), name)
		}
		ms := float64(time.Since(t0).Microseconds()) / 1e3
		res := "answered"
		if err != nil {
			res = "failed"
			failed++
		}
		fmt.Printf("lookup %d %d %s: %.1f ms, %s\n", os.Getpid(), i, name, ms, res)
		lookups++
		total += ms
		most = max(most, ms)
		time.Sleep(*pause)
	}
	fmt.Printf("RESULT procs=1 lookups=%d failed=%d total_ms=%.1f max_ms=%.1f\n", lookups, failed, total, most)
}
