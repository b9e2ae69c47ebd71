package doctor

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/sysray/sysray/internal/dns"
	"github.com/sysray/sysray/internal/event"
	hostfacts "github.com/sysray/sysray/internal/host"
	"github.com/sysray/sysray/internal/units"
)

// DNSNXDomain: a process's lookups answered "no such name", again and
// again: each name tried with every domain of resolv.conf's search list
// before it is asked as written (ndots), or a name that does not exist
// asked for on every request.
const DNSNXDomain ID = "dns-nxdomain"

func init() {
	register(registration{ids: []ID{DNSNXDomain},
		build: func(h *Host) Detector { return newNXDomain(h) }})
}

// nxdomain reads the answers a resolver reads from its socket. The kernel
// copies an answer's header and question only from a socket connected
// (or sent) to port 53, and only with samples (bpf/dnswatch.h: the doctor
// and the agent follow such a socket from its connect to its close, so its
// fast calls cross over). Each answer names its question and its rcode:
// NXDOMAIN ("no such name"), or no error with no record (NODATA: the name
// exists without a record of the type). glibc, musl and Go's resolver go
// on to the next candidate name after either, and the lookup fails once
// every candidate did so.
//
// The candidates are the name with each search domain put after it, and
// the name as written: the name as written first when it has at least
// ndots dots, last otherwise (glibc, musl, Go alike). So an answer to
// NAME.DOMAIN, where DOMAIN is in the process's search list, is one
// candidate of a lookup of NAME; an answer to a name with no search domain
// after it is the name as written. A lookup whose name was answered in
// some form (a record) wasted the candidates that failed before it: a
// round trip to the server each, on every lookup, and a load on the server
// the search list multiplies. A name whose every candidate failed does not
// exist.
type nxdomain struct {
	host  *Host
	arch  event.Arch
	procs map[uint32]*nxProc
	// sent is when each query went out, by process and message ID: an
	// answer's round trip is its read's end minus its send's end.
	sent map[nxQueryKey]uint64
}

type nxQueryKey struct {
	pid uint32
	id  uint16
	q   string
}

type nxProc struct {
	comm  string
	conf  *resolvConf
	read  bool               // conf was looked for
	names map[string]*nxCand // the answers, by the name asked (lower case)
	calls map[string]uint64  // the calls the answers were read with
}

// nxBase is the lookups of one name as the program wrote it: the answers
// to each of its candidates, by search domain ("" as written).
type nxBase struct {
	cands map[string]*nxCand
}

// nxCand is the answers to one name asked.
type nxCand struct {
	domain string // set by bases: the search domain after the name, "" as written
	// by type ("A", "AAAA"): answers, failed ones, and the time their
	// round trips took where the query's send was seen.
	answers, failed map[string]uint64
	records         uint64 // answers with a record
	failedNS        uint64
	timed           uint64 // failed answers whose round trip is known
}

// Thresholds. See docs/detectors/dns-nxdomain.md.
const (
	// nxRepeat: lookups of one name, each of which failed a candidate,
	// from which the waste is the program's steady cost, not a one-off:
	// a program that resolves its configuration once at start looks each
	// name up once or twice; three times is a lookup per connection or
	// request, paid again each time.
	nxRepeat = 3
	// nxKept bounds the processes and queries followed, each.
	nxKept = 1 << 14
	// nxNames bounds the names followed per process: the search domains
	// are inferred by comparing them two by two.
	nxNames = 1024
	// nxNamed: names shown in a finding.
	nxNamed = 5
)

func newNXDomain(h *Host) *nxdomain {
	return &nxdomain{host: h, arch: h.Arch, procs: map[uint32]*nxProc{}, sent: map[nxQueryKey]uint64{}}
}

func (x *nxdomain) Observe(e *event.Event) {
	if e.Kind != event.KindSyscall || e.Syscall.Unfinished || e.Syscall.Ret <= 0 {
		return
	}
	s := &e.Syscall
	switch event.SyscallName(x.arch, s.Nr) {
	case "sendto", "sendmmsg", "write", "writev", "sendmsg":
		for i := range s.Data {
			q, ok := dns.Parse(s.Data[i])
			if !ok {
				q, ok = dns.ParseFramed(s.Data[i], s.Args[2])
			}
			if !ok || q.Cut {
				continue
			}
			if len(x.sent) >= nxKept {
				// Queries never answered (a silent server's) would hold
				// the table: start again, losing a few round trips.
				clear(x.sent)
			}
			x.sent[nxQueryKey{e.PID, q.ID, q.String()}] = e.End()
		}
	case "read", "recvfrom":
		if a, ok := dns.ParseAnswer(s.Data[1]); ok && !a.Cut {
			x.answer(e, a, event.SyscallName(x.arch, s.Nr))
		}
	}
}

func (x *nxdomain) answer(e *event.Event, a dns.Answer, call string) {
	p := x.procs[e.PID]
	if p == nil {
		if len(x.procs) >= nxKept {
			return
		}
		p = &nxProc{comm: e.Comm, names: map[string]*nxCand{}, calls: map[string]uint64{}}
		x.procs[e.PID] = p
	}
	if !p.read {
		// Live, while the process runs: the file in its own root.
		p.read = true
		if x.host.Live && x.host.canRead() {
			p.conf = readResolvConf(e.PID)
		} else if text := x.host.Meta[hostfacts.MetaResolvConf]; text != "" {
			p.conf = parseResolvConf(text)
			p.conf.from = "the capture's host"
		}
	}
	name := strings.ToLower(a.Name)
	c := p.names[name]
	if c == nil {
		if len(p.names) >= nxNames {
			return
		}
		c = &nxCand{answers: map[string]uint64{}, failed: map[string]uint64{}}
		p.names[name] = c
	}
	t := dns.TypeName(a.Type)
	c.answers[t]++
	p.calls[call]++
	key := nxQueryKey{e.PID, a.ID, a.Question.String()}
	sent, seen := x.sent[key]
	delete(x.sent, key)
	if a.Rcode == 3 || a.Rcode == 0 && a.Records == 0 {
		c.failed[t]++
		if seen && e.End() >= sent {
			c.failedNS += e.End() - sent
			c.timed++
		}
	} else if a.Rcode == 0 {
		c.records++
	}
}

// nxShape is one finding's lookups: wasted search candidates, or names
// that do not exist.
type nxShape struct {
	procs   map[uint32]uint64 // failed answers, by process
	names   map[string]uint64 // failed answers, by name as written
	lookups map[string]uint64 // lookups, by name as written
	nLookup uint64            // lookups of every name
	failed  uint64
	total   uint64
	ns      uint64 // round trips of the failed answers timed
	timed   uint64
	domains map[string]uint64
	repeat  uint64 // the most lookups of one name
	calls   map[string]uint64
	conf    *resolvConf
	// inferred: search domains read from the answers, where no
	// resolv.conf was (a process gone before it could be read).
	inferred []string
}

func newShape() *nxShape {
	return &nxShape{procs: map[uint32]uint64{}, names: map[string]uint64{}, lookups: map[string]uint64{}, domains: map[string]uint64{},
		calls: map[string]uint64{}}
}

// bases groups a process's answers by the name as the program wrote it.
// A name asked is NAME.DOMAIN, a candidate of NAME, when DOMAIN is in the
// process's search list, or, where that list is unknown, when NAME was
// itself found (a record) and NAME.DOMAIN failed: the resolver put DOMAIN
// after it. The longest domain wins ("svc.cluster.local" before
// "cluster.local"). inferred is the domains found the second way.
func (p *nxProc) bases() (map[string]*nxBase, []string) {
	domains := map[string]bool{}
	var inferred []string
	if p.conf != nil {
		for _, d := range p.conf.search {
			domains[strings.ToLower(strings.TrimSuffix(d, "."))] = true
		}
	} else {
		for n, c := range p.names {
			if c.records > 0 || len(c.failed) == 0 {
				continue
			}
			for f, fc := range p.names {
				if d, ok := strings.CutPrefix(n, f+"."); ok && fc.records > 0 && !domains[d] {
					domains[d] = true
					inferred = append(inferred, d)
				}
			}
		}
		sort.Strings(inferred)
	}
	out := map[string]*nxBase{}
	for n, c := range p.names {
		base, domain := n, ""
		for d := range domains {
			if strings.HasSuffix(n, "."+d) && len(d) > len(domain) {
				base, domain = strings.TrimSuffix(n, "."+d), d
			}
		}
		b := out[base]
		if b == nil {
			b = &nxBase{cands: map[string]*nxCand{}}
			out[base] = b
		}
		c.domain = domain
		b.cands[domain] = c
	}
	return out, inferred
}

func (x *nxdomain) Findings(env *Env) []Finding {
	search, missing := newShape(), newShape()
	pids := pidsOf(x.procs)
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	for _, pid := range pids {
		p := x.procs[pid]
		bases, inferred := p.bases()
		if len(inferred) > 0 && search.inferred == nil {
			search.inferred = inferred
		}
		var in []*nxShape // the shapes the process's names joined
		for base, b := range bases {
			var total, lookups, records uint64
			for _, c := range b.cands {
				for _, n := range c.answers {
					total += n
					// A lookup asks each candidate once for each type.
					lookups = max(lookups, n)
				}
				records += c.records
			}
			// Found in some form (a record): the candidates that failed
			// before it were the waste, and the answer with a record and
			// its NODATA sibling (A found, no AAAA) are the name found.
			// Never found: every failed answer is the missing name's.
			sh := missing
			if records > 0 {
				sh = search
			}
			var failed, ns, timed uint64
			for _, c := range b.cands {
				if c.records > 0 {
					continue
				}
				for _, n := range c.failed {
					failed += n
				}
				ns += c.failedNS
				timed += c.timed
				if records > 0 && c.domain != "" {
					sh.domains[c.domain] += lookups
				}
			}
			if failed == 0 {
				continue
			}
			sh.procs[pid] += failed
			sh.names[base] += failed
			sh.lookups[base] += lookups
			sh.nLookup += lookups
			sh.failed += failed
			sh.total += total
			sh.ns += ns
			sh.timed += timed
			sh.repeat = max(sh.repeat, lookups)
			if sh.conf == nil && p.conf != nil {
				sh.conf = p.conf
			}
			if !slices.Contains(in, sh) {
				in = append(in, sh)
			}
		}
		// The calls the process read its answers with, once for each
		// finding its names joined.
		for _, sh := range in {
			for c, n := range p.calls {
				sh.calls[c] += n
			}
		}
	}
	var out []Finding
	if len(search.procs) > 0 {
		out = append(out, x.searchFinding(env, search))
	}
	if len(missing.procs) > 0 {
		out = append(out, x.missingFinding(env, missing))
	}
	return out
}

// who names the processes of a shape, the one with most failed answers first.
func (x *nxdomain) who(env *Env, sh *nxShape) (string, []uint32) {
	pids := pidsOf(sh.procs)
	sort.Slice(pids, func(i, j int) bool {
		return sh.procs[pids[i]] > sh.procs[pids[j]] || sh.procs[pids[i]] == sh.procs[pids[j]] && pids[i] < pids[j]
	})
	who := env.ProcName(pids[0], x.procs[pids[0]].comm)
	if len(pids) > 1 {
		who = fmt.Sprintf("%d processes (%s, …)", len(pids), who)
	}
	return who, pids
}

// names lists the names with most failed answers first, each with its lookups.
func (sh *nxShape) nameList() (string, []map[string]any) {
	names := byValue(sh.names)
	var parts []string
	var ev []map[string]any
	for i, n := range names {
		if i == nxNamed {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%d %s, %d failed %s)", n, sh.lookups[n], plural(int(sh.lookups[n]), "lookup", "lookups"),
			sh.names[n], plural(int(sh.names[n]), "answer", "answers")))
		ev = append(ev, map[string]any{"name": n, "lookups": sh.lookups[n], "failed_answers": sh.names[n]})
	}
	return strings.Join(parts, ", "), ev
}

func (sh *nxShape) evidence(pids []uint32) map[string]any {
	ev := map[string]any{"failed_answers": sh.failed, "answers": sh.total, "processes": len(pids),
		"most_lookups_of_a_name": sh.repeat, "lookups": sh.nLookup, "names_count": len(sh.names)}
	if sh.timed > 0 {
		ev["failed_round_trip_ns"] = sh.ns / sh.timed
	}
	if c := sh.conf; c != nil {
		ev["resolv_conf"] = c.from
		ev["search"] = c.search
		ev["ndots"] = c.ndots
	}
	return ev
}

func (sh *nxShape) severity() (Severity, string) {
	if sh.repeat >= nxRepeat {
		return Warning, fmt.Sprintf("a name was looked up %d times, failing each time as it did: the cost is paid on every lookup, not once at start", sh.repeat)
	}
	return Info, fmt.Sprintf("no name was looked up %d times in the trace: a one-off, such as a program resolving its configuration at start", nxRepeat)
}

func (x *nxdomain) searchFinding(env *Env, sh *nxShape) Finding {
	who, pids := x.who(env, sh)
	list, names := sh.nameList()
	ev := sh.evidence(pids)
	ev["names"] = names
	ev["search_domains_failed"] = sh.domains
	sev, because := sh.severity()
	ev["severity_because"] = because
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d of its %d DNS answers were \"no such name\" (NXDOMAIN) or \"no record\" (NODATA) for a name with a search domain "+
		"put after it, before the name was found: %s. ", who, sh.failed, sh.total, list)
	per := float64(int(float64(sh.failed)/float64(max(sh.nLookup, 1))*10+0.5)) / 10
	ev["wasted_per_lookup"] = per
	fmt.Fprintf(&b, "That is %.1f wasted queries a lookup", per)
	if sh.timed > 0 {
		fmt.Fprintf(&b, ", each a round trip to the name server (%s on average here)", units.Duration(sh.ns/sh.timed))
	}
	b.WriteString(". ")
	conf := "The process's resolv.conf could not be read"
	if len(sh.inferred) > 0 {
		conf = fmt.Sprintf("The process's resolv.conf could not be read (it had ended); the answers show the search domains %s",
			strings.Join(sh.inferred, " "))
		ev["search_inferred"] = sh.inferred
	}
	if c := sh.conf; c != nil {
		conf = fmt.Sprintf("Search list %s, ndots:%d (%s)", strings.Join(c.search, " "), c.ndots, c.from)
	}
	fmt.Fprintf(&b, "%s: the resolver tries a name with fewer than ndots dots with each search domain first, and asks for it "+
		"as written only after every one failed.", conf)
	// ndots at or under the fewest dots of the names found lets each be
	// asked as written first; a name of one label needs the search list.
	first := byValue(sh.names)[0]
	dots := -1
	for n := range sh.names {
		if d := strings.Count(n, "."); dots < 0 || d < dots {
			dots = d
		}
	}
	ev["fewest_dots"] = dots
	fix := fmt.Sprintf("Write the names the program looks up fully qualified, with a trailing dot (%s.), so the search list is skipped", first)
	if dots > 0 {
		// The search domains were tried first, so ndots is above the names' dots.
		fix += fmt.Sprintf("; or lower ndots to %d (options ndots:%d in resolv.conf; in Kubernetes the pod's dnsConfig options, "+
			"whose default is ndots:5), so names with %d dots or more are asked for as written first", dots, dots, dots)
	}
	fix += ". Or trim the search list to the domains the program's short names live in, the likeliest first. " +
		"A caching resolver (nscd, systemd-resolved, NodeLocal DNSCache) answers the repeats from its cache, but each query " +
		"still costs the program a round trip to it."
	return Finding{ID: DNSNXDomain, Severity: sev,
		Title:   fmt.Sprintf("DNS search list multiplies lookups: %d failed answers before the names were found", sh.failed),
		Summary: b.String(), Evidence: ev, Fix: fix, Score: float64(sh.failed),
		Key: "search", Syscalls: byValue(sh.calls), Procs: env.refs(pids...)}
}

func (x *nxdomain) missingFinding(env *Env, sh *nxShape) Finding {
	who, pids := x.who(env, sh)
	list, names := sh.nameList()
	ev := sh.evidence(pids)
	ev["names"] = names
	sev, because := sh.severity()
	ev["severity_because"] = because
	lookups := sh.nLookup
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d %s of %d %s failed: the name server answered \"no such name\" (NXDOMAIN) or \"no record\" "+
		"(NODATA) for every name tried, %d answers in all: %s. ", who, lookups, plural(int(lookups), "lookup", "lookups"),
		len(sh.names), plural(len(sh.names), "name", "names"), sh.failed, list)
	if c := sh.conf; c != nil && len(c.search) > 0 {
		fmt.Fprintf(&b, "Each was also tried with the search list (%s, ndots:%d, %s). ", strings.Join(c.search, " "), c.ndots, c.from)
	}
	b.WriteString("The program gets an error (EAI_NONAME, \"Name or service not known\"), and the negative answer is cached, if at all, " +
		"only as long as the zone's SOA minimum says.")
	return Finding{ID: DNSNXDomain, Severity: sev,
		Title: fmt.Sprintf("DNS lookups of names that do not exist: %d failed %s", lookups,
			plural(int(lookups), "lookup", "lookups")),
		Summary: b.String(), Evidence: ev,
		Fix: "Find where the program takes the name from (its configuration, a service discovery record, an environment variable) " +
			"and correct it, or create the record. A program that retries a failing lookup in a loop should back off.",
		Score: float64(sh.failed), Key: "missing", Syscalls: byValue(sh.calls), Procs: env.refs(pids...)}
}
