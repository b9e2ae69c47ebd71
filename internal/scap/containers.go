package scap

import (
	"encoding/json"
	"strings"

	"github.com/sysray/sysray/internal/filter"
)

// How a scap file carries containers, as libsinsp at the writer's version
// (e5c53d64) reads them:
//
//   - each thread's cgroups ("subsys=path" strings, NUL-separated) in the
//     process list and in the exits of clone and execve: libsinsp's
//     container engines find the container's id in a path, each in its
//     runtime's layout (a path ending in "/" and 64 hex digits, Docker's
//     and CRI's, gives the id's first 12 digits; "/lxc/ID" gives ID);
//   - one container event (PPME_CONTAINER_JSON_E) per container before
//     the events, whose JSON names it ({"container": {"id", "full_id",
//     "type", "name", "image", "labels", "lookup_state"}}): sysdig's
//     container.name, container.image, container.type, and k8s.pod.name
//     and k8s.ns.name from the labels io.kubernetes.pod.name and
//     io.kubernetes.pod.namespace.
//
// A path is what makes a thread belong to a container, so the writer
// writes the path in the layout libsinsp matches for the container's id,
// not the thread's own path (a containerd container started by ctr lives
// in /NAMESPACE/NAME, which no engine of libsinsp recognises).
const evContainerJSONE = 272 // PPME_CONTAINER_JSON_E: one CHARBUF, 16-bit length

// sinsp_container_type of libsinsp's container_engine/sinsp_container_type.h.
const (
	ctDocker     = 0
	ctLXC        = 1
	ctCustom     = 5
	ctCRI        = 6
	ctContainerd = 7
	ctCRIO       = 8
	ctPodman     = 11
)

var ctTypes = map[string]int{"docker": ctDocker, "lxc": ctLXC, "cri": ctCRI, "containerd": ctContainerd, "cri-o": ctCRIO, "podman": ctPodman}

// ctNames is ctTypes backwards, for the import.
var ctNames = map[int]string{ctDocker: "docker", ctLXC: "lxc", ctCRI: "cri", ctContainerd: "containerd", ctCRIO: "cri-o", ctPodman: "podman"}

// hexID says whether id is a runtime's 64-hex-digit id: libsinsp's runc
// layouts take only those, and report their first 12 digits.
func hexID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// sinspID is the id sysdig shows for a container (container.id).
func sinspID(c filter.Container) string {
	if hexID(c.ID) {
		return c.ID[:12]
	}
	return c.ID
}

// writable says whether a container id can travel in a cgroup path that
// libsinsp parses back to the same id: "/lxc/ID" ends the id at a '/',
// and set_cgroups splits an entry at its last '='.
func writable(id string) bool {
	return id != "" && !strings.ContainsAny(id, "/=\x00")
}

// cgroupsOf is the cgroups value of a thread in container c: one cpuset
// entry whose path libsinsp's engines turn into c's id; empty on the host
// (and for an id no path carries).
func cgroupsOf(c filter.Container) []string {
	switch {
	case hexID(c.ID):
		return []string{"cpuset=/" + c.ID}
	case writable(c.ID):
		return []string{"cpuset=/lxc/" + c.ID}
	}
	return nil
}

// cgroupsBytes is a cgroups parameter: each entry followed by its NUL.
func cgroupsBytes(cg []string) []byte {
	var b []byte
	for _, s := range cg {
		b = append(append(b, s...), 0)
	}
	return b
}

type containerJSON struct {
	Container struct {
		ID          string            `json:"id"`
		FullID      string            `json:"full_id"`
		Type        int               `json:"type"`
		Name        string            `json:"name"`
		Image       string            `json:"image"`
		LookupState int               `json:"lookup_state"`
		Labels      map[string]string `json:"labels"`
	} `json:"container"`
}

const (
	labelPod       = "io.kubernetes.pod.name"
	labelNamespace = "io.kubernetes.pod.namespace"
)

// containerEvents are the JSON parameters of the container events that
// describe c. A container whose id libsinsp's LXC engine matches gets a
// first event typed LXC: that engine makes its own bare entry (the id as
// name, no image) for a thread it meets, unless a lookup of that id by
// that type is already on record, and the event is that record; the
// second event then gives the runtime's own type.
func containerEvents(c filter.Container) [][]byte {
	var j containerJSON
	x := &j.Container
	x.ID, x.FullID, x.Name, x.Image = sinspID(c), c.ID, c.Name, c.Image
	x.LookupState = 1 // SUCCESSFUL: sysdig drops a container whose lookup failed
	x.Labels = map[string]string{}
	if c.PodName != "" {
		x.Labels[labelPod] = c.PodName
	}
	if c.PodNamespace != "" {
		x.Labels[labelNamespace] = c.PodNamespace
	}
	typ, ok := ctTypes[c.Runtime]
	if !ok {
		typ = ctCustom
	}
	var out [][]byte
	if !hexID(c.ID) && typ != ctLXC {
		x.Type = ctLXC
		b, _ := json.Marshal(j)
		out = append(out, b)
	}
	x.Type = typ
	b, _ := json.Marshal(j)
	return append(out, b)
}

// parseContainerJSON reads a container event's JSON (as libsinsp writes
// it, or as the exporter does) into a container; ok is false for JSON
// that names none.
func parseContainerJSON(b []byte) (c filter.Container, ok bool) {
	var j struct {
		Container struct {
			ID     string            `json:"id"`
			FullID string            `json:"full_id"`
			Type   *int              `json:"type"`
			Name   string            `json:"name"`
			Image  string            `json:"image"`
			Labels map[string]string `json:"labels"`
		} `json:"container"`
	}
	if json.Unmarshal(trimNUL(b), &j) != nil || j.Container.ID == "" {
		return c, false
	}
	x := &j.Container
	c.ID = x.ID
	if x.FullID != "" {
		c.ID = x.FullID
	}
	c.Name, c.Image = x.Name, x.Image
	if x.Type != nil {
		c.Runtime = ctNames[*x.Type]
	}
	c.PodName, c.PodNamespace = x.Labels[labelPod], x.Labels[labelNamespace]
	return c, true
}

func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// cgroupContainer is the container libsinsp's engines find in a thread's
// cgroups (the id as they report it), "" for none: a runtime's 64-hex id
// ending a path after "/", "/docker-", "/crio-", "/cri-containerd-",
// "/libpod-" (a ".scope" after it allowed) or ":cri-containerd:", or the
// name after "/lxc/" or "/lxc.payload/".
func cgroupContainer(cgroups []string) string {
	for _, e := range cgroups {
		_, path, ok := cutLast(e, "=")
		if !ok {
			continue
		}
		if id := runcID(path); id != "" {
			return id
		}
	}
	for _, e := range cgroups {
		_, path, _ := cutLast(e, "=")
		for _, p := range []string{"/lxc/", "/lxc.payload/"} {
			if i := strings.Index(path, p); i >= 0 {
				id := path[i+len(p):]
				if j := strings.IndexByte(id, '/'); j >= 0 {
					id = id[:j]
				}
				if id != "" {
					return id
				}
			}
		}
	}
	return ""
}

func cutLast(s, sep string) (before, after string, ok bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// runcID is the 12-digit id of a path that ends in a runtime's layout.
func runcID(path string) string {
	last := path
	if i := strings.LastIndexAny(path, "/:"); i >= 0 {
		last = path[i+1:]
	}
	last = strings.TrimSuffix(last, ".scope")
	for _, p := range []string{"docker-", "crio-", "cri-containerd-", "libpod-"} {
		last = strings.TrimPrefix(last, p)
	}
	if hexID(last) {
		return last[:12]
	}
	return ""
}

// container takes a container event: PPME_CONTAINER_JSON_E and _2_E
// (one JSON parameter), or the older PPME_CONTAINER_E (id, type, name,
// image).
func (c *Converter) container(x *Event) {
	var ctr filter.Container
	if i, ok := x.param("json"); ok {
		var found bool
		if ctr, found = parseContainerJSON(x.Params[i]); !found {
			return
		}
	} else {
		id, _ := x.StrNamed("id")
		if id == "" {
			return
		}
		ctr.ID = id
		ctr.Name, _ = x.StrNamed("name")
		ctr.Image, _ = x.StrNamed("image")
		if typ, ok := x.IntNamed("type"); ok {
			ctr.Runtime = ctNames[int(typ)]
		}
	}
	key := sinspID(ctr)
	if i, ok := c.ctrIdx[key]; ok {
		// A later event about the same container describes it anew.
		c.St.Containers[i] = ctr
		return
	}
	c.ctrIdx[key] = len(c.St.Containers)
	c.St.Containers = append(c.St.Containers, ctr)
}

// cgroup is the number the import gives the events of a container's
// threads (scap keeps cgroup paths, not the kernel's cgroup ids): its
// place in Stats.Containers, plus one; 0 for the host. A container that
// no event describes is listed by its id alone.
func (c *Converter) cgroup(id string) uint64 {
	if id == "" {
		return 0
	}
	i, ok := c.ctrIdx[id]
	if !ok {
		i = len(c.St.Containers)
		c.ctrIdx[id] = i
		c.St.Containers = append(c.St.Containers, filter.Container{ID: id})
	}
	return uint64(i) + 1
}

// containersMeta is the capture header's table of the containers
// (session.MetaContainers' format): each with its cgroup number.
func containersMeta(cs []filter.Container) string {
	type entry struct {
		filter.Container
		Cgroups []uint64 `json:"cgroups"`
	}
	out := make([]entry, len(cs))
	for i, c := range cs {
		out[i] = entry{c, []uint64{uint64(i) + 1}}
	}
	b, _ := json.Marshal(out)
	return string(b)
}
