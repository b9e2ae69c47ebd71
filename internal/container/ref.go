package container

import (
	"strconv"
	"strings"
)

// Runtimes a Ref can name.
const (
	RuntimeDocker     = "docker"
	RuntimeContainerd = "containerd"
	RuntimeCRIO       = "cri-o"
	RuntimePodman     = "podman"
	RuntimeRunc       = "runc"
	RuntimeLXC        = "lxc"
	// RuntimeCRI is a Kubernetes container whose cgroup path (kubelet's
	// cgroupfs driver: /kubepods/QOS/podUID/ID) does not say which CRI
	// runtime runs it; metadata sources try the CRI sockets in turn.
	RuntimeCRI = "cri"
)

// Ref says what a cgroup belongs to. The zero Ref is the host.
type Ref struct {
	Runtime   string // one of the Runtime constants; "" for the host and services
	ID        string // container id, or name where the runtime uses names (containerd, lxc)
	Namespace string // containerd namespace ("default", "k8s.io"), when known
	PodUID    string // Kubernetes pod UID, with dashes
	QoS       string // Kubernetes QoS class: guaranteed, burstable or besteffort
	Service   string // systemd service without ".service", when not in a container
	Monitor   bool   // the runtime's monitor (conmon) of container ID, not the container
	Path      string // the cgroup path this was parsed from
}

// IsContainer reports whether r names a container (not its monitor).
func (r Ref) IsContainer() bool { return r.ID != "" && !r.Monitor }

// IsHost reports whether r names neither a container, a pod, a monitor nor
// a service: the host itself (root cgroup, slices, sessions, ...).
func (r Ref) IsHost() bool { return r.ID == "" && r.PodUID == "" && r.Service == "" }

// ShortID is the id cut to 12 characters when it is a hex digest (as Docker
// shows it); names (containerd, lxc) are short already and stay whole.
func (r Ref) ShortID() string {
	if len(r.ID) > 12 && isHex(r.ID) {
		return r.ID[:12]
	}
	return r.ID
}

// String is a one-line description: "host", "service cron",
// "docker 4c01db0b339c", "containerd default/web", "cri-o 1a2b3c4d5e6f
// (pod 0f1e...)", "cri-o conmon of 1a2b3c4d5e6f".
func (r Ref) String() string {
	var b strings.Builder
	switch {
	case r.ID != "":
		b.WriteString(r.Runtime)
		if r.Monitor {
			b.WriteString(" conmon of")
		}
		b.WriteByte(' ')
		if r.Namespace != "" && r.Namespace != "k8s.io" {
			b.WriteString(r.Namespace + "/")
		}
		b.WriteString(r.ShortID())
		if r.PodUID != "" {
			b.WriteString(" (pod " + r.PodUID + ")")
		}
	case r.PodUID != "":
		b.WriteString("pod " + r.PodUID)
	case r.Service != "":
		b.WriteString("service " + r.Service)
	default:
		b.WriteString("host")
	}
	return b.String()
}

// DefaultNamespaces are the containerd namespaces whose default cgroup path
// "/<namespace>/<id>" the package-level Parse recognises. Any other
// two-level path ("/user.slice/x", "/batch/job1") would be a guess; a Table
// connected to containerd learns the namespaces that really exist.
var DefaultNamespaces = []string{"default", "k8s.io"}

// Parser turns cgroup paths into Refs. Its only state is the set of
// containerd namespaces it trusts for the "/<namespace>/<id>" form.
type Parser struct {
	namespaces map[string]bool
}

// NewParser returns a Parser that recognises "/<ns>/<id>" as a containerd
// container for the given namespaces (DefaultNamespaces if none).
func NewParser(containerdNamespaces ...string) *Parser {
	if len(containerdNamespaces) == 0 {
		containerdNamespaces = DefaultNamespaces
	}
	p := &Parser{namespaces: make(map[string]bool, len(containerdNamespaces))}
	for _, ns := range containerdNamespaces {
		p.namespaces[ns] = true
	}
	return p
}

var defaultParser = NewParser()

// Parse parses a cgroup path with the default Parser.
func Parse(path string) Ref { return defaultParser.Parse(path) }

// ParseCgroupFile parses /proc/PID/cgroup with the default Parser.
func ParseCgroupFile(data []byte) Placement { return defaultParser.ParseCgroupFile(data) }

// Parse returns what the cgroup path belongs to. It accepts a bare path
// ("/docker/<id>") or a whole /proc/PID/cgroup line ("0::/docker/<id>",
// "4:memory:/docker/<id>"). Recognised forms, at any depth (the innermost
// container wins, for nested runtimes):
//
//	/docker/<64hex>                                   docker, cgroupfs driver
//	.../docker-<64hex>.scope                          docker, systemd driver
//	/<namespace>/<id>                                 containerd default (ctr, nerdctl)
//	.../cri-containerd-<id>.scope                     containerd CRI, systemd driver
//	.../crio-<64hex>.scope, .../crio-<64hex>          CRI-O
//	.../crio-conmon-<64hex>.scope                     CRI-O's conmon (Monitor)
//	.../libpod-<64hex>.scope, .../libpod-<64hex>      Podman
//	.../libpod-conmon-<64hex>.scope                   Podman's conmon (Monitor)
//	.../runc-<id>.scope, /<64hex>                     plain runc (systemd, cgroupfs)
//	/lxc/<name>, .../lxc.payload.<name>               LXC (lxc.monitor.<name>: Monitor)
//	/kubepods[/burstable|/besteffort]/pod<uid>/<id>   Kubernetes, cgroupfs driver (runtime "cri")
//	/kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid_>.slice/<scope>
//	                                                  Kubernetes, systemd driver
//	.../<name>.service                                systemd service (not a container)
//	/                                                 the host
func (p *Parser) Parse(path string) Ref {
	path = stripLinePrefix(path)
	r := Ref{Path: path}
	segs := splitPath(path)
	inKube := false
	service := ""
	set := func(runtime, id string, monitor bool) {
		r.Runtime, r.ID, r.Monitor, r.Namespace = runtime, id, monitor, ""
	}
	for i, s := range segs {
		switch {
		case s == "kubepods" || s == "kubepods.slice":
			inKube = true
		case inKube && (s == "burstable" || s == "besteffort"):
			r.QoS = s
		case inKube && strings.HasPrefix(s, "kubepods-") && strings.HasSuffix(s, ".slice"):
			// kubepods-burstable.slice, kubepods-burstable-pod<uid_>.slice,
			// kubepods-pod<uid_>.slice (guaranteed).
			name := strings.TrimSuffix(strings.TrimPrefix(s, "kubepods-"), ".slice")
			if q, rest, ok := strings.Cut(name, "-"); ok && (q == "burstable" || q == "besteffort") {
				r.QoS = q
				name = rest
			} else if name == "burstable" || name == "besteffort" {
				r.QoS = name
				continue
			}
			if uid, ok := strings.CutPrefix(name, "pod"); ok && validPodUID(uid) {
				r.PodUID = strings.ReplaceAll(uid, "_", "-")
			}
		case inKube && strings.HasPrefix(s, "pod") && validPodUID(s[3:]):
			r.PodUID = s[3:]
		case s == "docker" && i+1 < len(segs) && isHex64(segs[i+1]):
			set(RuntimeDocker, segs[i+1], false)
		case s == "lxc" && i+1 < len(segs) && validID(segs[i+1]) && i == 0:
			set(RuntimeLXC, segs[i+1], false)
		case i == 0 && len(segs) > 1 && p.namespaces[s] && validID(segs[1]):
			set(RuntimeContainerd, segs[1], false)
			r.Namespace = s
		case i == 0 && len(segs) == 1 && isHex64(s):
			set(RuntimeRunc, s, false)
		case inKube && r.PodUID != "" && isHex64(s):
			set(RuntimeCRI, s, false)
		default:
			if rt, id, mon, ok := unitContainer(s); ok {
				set(rt, id, mon)
				if rt == RuntimeContainerd {
					r.Namespace = "k8s.io"
				}
			} else if name, ok := strings.CutSuffix(s, ".service"); ok && name != "" {
				service = name
			}
		}
	}
	if r.ID == "" && r.PodUID == "" {
		r.Service = service
		r.QoS = ""
	}
	if r.PodUID != "" && r.QoS == "" {
		r.QoS = "guaranteed"
	}
	return r
}

// unitContainer recognises one path segment that names a container by
// itself: systemd scopes of the runtimes, and CRI-O/Podman/LXC cgroupfs names.
func unitContainer(s string) (runtime, id string, monitor, ok bool) {
	forms := []struct {
		prefix  string
		runtime string
		monitor bool
		scope   bool // requires the ".scope" suffix
		hex     bool // requires a 64-hex id
	}{
		// CRI-O and Podman ids are 64 hex, which keeps units such as
		// crio-wipe.service from passing for containers.
		{"crio-conmon-", RuntimeCRIO, true, false, true},
		{"crio-", RuntimeCRIO, false, false, true},
		{"libpod-conmon-", RuntimePodman, true, false, true},
		{"libpod-", RuntimePodman, false, false, true},
		{"cri-containerd-", RuntimeContainerd, false, true, false},
		{"docker-", RuntimeDocker, false, true, true},
		{"runc-", RuntimeRunc, false, true, false},
		{"lxc.payload.", RuntimeLXC, false, false, false},
		{"lxc.monitor.", RuntimeLXC, true, false, false},
	}
	for _, f := range forms {
		rest, found := strings.CutPrefix(s, f.prefix)
		if !found {
			continue
		}
		rest, scoped := strings.CutSuffix(rest, ".scope")
		if f.scope && !scoped || f.hex && !isHex64(rest) || !validID(rest) {
			return "", "", false, false
		}
		return f.runtime, rest, f.monitor, true
	}
	return "", "", false, false
}

// CgroupLine is one line of /proc/PID/cgroup.
type CgroupLine struct {
	Hierarchy   int      // 0 for the v2 line
	Controllers []string // v1 controllers ("cpu", "name=systemd"); empty for v2
	Path        string
}

// V2 reports whether l is the cgroup v2 (unified) line "0::/path".
func (l CgroupLine) V2() bool { return l.Hierarchy == 0 && len(l.Controllers) == 0 }

// CgroupLines parses /proc/PID/cgroup. Malformed lines are skipped.
func CgroupLines(data []byte) []CgroupLine {
	var out []CgroupLine
	for _, line := range strings.Split(string(data), "\n") {
		h, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctl, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(h)
		if err != nil {
			continue
		}
		l := CgroupLine{Hierarchy: n, Path: path}
		if ctl != "" {
			l.Controllers = strings.Split(ctl, ",")
		}
		out = append(out, l)
	}
	return out
}

// Placement is what /proc/PID/cgroup says about one process.
type Placement struct {
	Ref    Ref
	V2Path string // the v2 path, "" if the process has no v2 line
	// FromV1 is set when Ref comes from a v1 hierarchy because the v2 path
	// names no container: on hybrid hosts a runtime may place a container
	// only in the v1 controllers, leaving its v2 cgroup at "/" (or in the
	// runtime's own service), so its events' cgroup id says nothing.
	FromV1 bool
}

// v1 hierarchies in the order they are trusted to name a container.
var v1Order = []string{"name=systemd", "cpu", "memory", "pids", "cpuacct", "blkio", "devices", "freezer", "cpuset"}

// ParseCgroupFile says what a process belongs to from its /proc/PID/cgroup:
// the v2 line when it names a container or pod, else the first v1 line
// (name=systemd, cpu, memory, ...) that does, else the v2 line (service or
// host).
func (p *Parser) ParseCgroupFile(data []byte) Placement {
	lines := CgroupLines(data)
	var pl Placement
	v2seen := false
	for _, l := range lines {
		if l.V2() {
			v2seen = true
			pl.V2Path = l.Path
			pl.Ref = p.Parse(l.Path)
		}
	}
	if pl.Ref.ID != "" || pl.Ref.PodUID != "" {
		return pl
	}
	rank := func(l CgroupLine) int {
		for _, c := range l.Controllers {
			for i, name := range v1Order {
				if c == name {
					return i
				}
			}
		}
		return len(v1Order)
	}
	best, bestRank := Ref{}, len(v1Order)+1
	var fallback *Ref
	for _, l := range lines {
		if l.V2() {
			continue
		}
		r := p.Parse(l.Path)
		if r.ID != "" || r.PodUID != "" {
			if k := rank(l); k < bestRank {
				best, bestRank = r, k
			}
		} else if !v2seen && fallback == nil && rank(l) == 0 {
			fallback = &r
		}
	}
	if bestRank <= len(v1Order) {
		pl.Ref, pl.FromV1 = best, true
	} else if fallback != nil {
		pl.Ref = *fallback
	}
	return pl
}

// stripLinePrefix turns "N:controllers:/path" into "/path".
func stripLinePrefix(s string) string {
	if strings.HasPrefix(s, "/") {
		return s
	}
	h, rest, ok := strings.Cut(s, ":")
	if !ok {
		return s
	}
	if _, err := strconv.Atoi(h); err != nil {
		return s
	}
	if _, path, ok := strings.Cut(rest, ":"); ok {
		return path
	}
	return s
}

func splitPath(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" && s != "." && s != ".." {
			out = append(out, s)
		}
	}
	return out
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s != ""
}

func isHex64(s string) bool { return len(s) == 64 && isHex(s) }

// validID accepts container ids and names as runtimes allow them:
// [A-Za-z0-9][A-Za-z0-9_.-]*, at most 128 characters.
func validID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return false
		}
	}
	return true
}

// validPodUID accepts a UUID with dashes or (systemd) underscores, or the
// 32-hex hash kubelet gives static pods.
func validPodUID(s string) bool {
	if len(s) != 32 && len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
