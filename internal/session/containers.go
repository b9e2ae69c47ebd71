package session

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sysray/sysray/internal/container"
	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/filter"
	"github.com/sysray/sysray/internal/output"
)

// Containers answers "which container is this event in?".
type Containers interface {
	Container(pid uint32, cgroup uint64) filter.Container
}

// Observer is a container table that learns from events.
type Observer interface {
	Observe(e *event.Event)
}

// MetaContainers is the capture header's meta key for the containers
// running when the capture began (docs/capture-format.md).
const MetaContainers = "containers"

// Live asks the host's container table, which learns in the background,
// and remembers containers named by the cgroup paths of exec events.
type Live struct {
	t *container.Table
	// seen holds containers learnt from exec events, by cgroup id: a
	// container that dies within milliseconds is gone before any refresh.
	mu   sync.RWMutex
	seen map[uint64]container.Ref
	// asked holds the host's cgroups (no container in their path) whose
	// first exec asked the table for a refresh. The table never maps a
	// host cgroup, so without it every exec there asked again: beside a
	// package install, record spent a third of its CPU walking /proc.
	asked map[uint64]struct{}
	kick  func()
}

// askedMax bounds asked: a host that makes more cgroups than this in one
// capture (a unit per job) has it emptied and learnt again, at one
// refresh per cgroup.
const askedMax = 1 << 14

// NewLive makes the table and waits up to 2 s for its first scan.
func NewLive() *Live {
	l := newLive()
	select {
	case <-l.t.Ready():
	case <-time.After(2 * time.Second):
	}
	return l
}

func newLive() *Live { return newLiveWith(container.Options{}) }

func newLiveWith(o container.Options) *Live {
	t := container.NewTable(o)
	return &Live{t: t, seen: map[uint64]container.Ref{}, asked: map[uint64]struct{}{}, kick: t.Kick}
}

func (l *Live) Close() { l.t.Close() }

// Observe lets the table learn a container the moment its first process
// execs: a container that dies young may have no cgroup left by the time
// anyone asks which container it was.
func (l *Live) Observe(e *event.Event) {
	if e.Kind != event.KindExec {
		return
	}
	l.mu.RLock()
	_, ok := l.seen[e.Cgroup]
	_, asked := l.asked[e.Cgroup]
	l.mu.RUnlock()
	if ok {
		return
	}
	// Remembered even when the table knows it now: the table forgets a
	// container once its cgroup is gone.
	if r := container.Parse(e.Proc.CgroupPath); r.IsContainer() {
		l.mu.Lock()
		l.seen[e.Cgroup] = r
		l.mu.Unlock()
		l.t.Meta(r) // start fetching while the runtime still knows it
	} else {
		// The v2 path names no container, but a hybrid host's runtime may
		// place it in the v1 controllers only: /proc says, read while the
		// process lives (a crash right after exec leaves nothing to read).
		l.t.ByPID(e.PID)
		if asked {
			return
		}
		l.mu.Lock()
		if len(l.asked) >= askedMax {
			clear(l.asked)
		}
		l.asked[e.Cgroup] = struct{}{}
		l.mu.Unlock()
	}
	if _, ok := l.t.ByCgroup(e.Cgroup); !ok {
		l.kick()
	}
}

// Ref is the container of a thread as the table or an exec event told it;
// the zero Ref for the host or unknown.
func (l *Live) Ref(pid uint32, cg uint64) container.Ref {
	r := l.t.Lookup(pid, cg)
	if !r.IsContainer() {
		l.mu.RLock()
		r = l.seen[cg]
		l.mu.RUnlock()
	}
	return r
}

// MetaWait asks the runtime about r, waiting for its answer until ctx ends.
func (l *Live) MetaWait(ctx context.Context, r container.Ref) (container.Meta, error) {
	return l.t.MetaWait(ctx, r)
}

func (l *Live) Container(pid uint32, cg uint64) filter.Container {
	r := l.Ref(pid, cg)
	if !r.IsContainer() {
		return filter.Container{}
	}
	c := filter.Container{ID: r.ID, Runtime: r.Runtime}
	if m, ok := l.t.Meta(r); ok {
		c.Name, c.Image, c.PodName, c.PodNamespace = m.Name, m.Image, m.PodName, m.PodNamespace
	}
	return c
}

// ContainerBy is Container for a report: a process the table has not
// placed yet is read from /proc at once, and the runtime has until
// deadline to name a container it has not named yet.
func (l *Live) ContainerBy(pid uint32, cg uint64, deadline time.Time) filter.Container {
	if !l.Ref(pid, cg).IsContainer() {
		l.t.Place(pid)
	}
	return l.containerBy(pid, cg, deadline)
}

// containerBy is Container, waiting until deadline for the runtime to name
// a container it has not named yet.
func (l *Live) containerBy(pid uint32, cg uint64, deadline time.Time) filter.Container {
	c := l.Container(pid, cg)
	if c.ID == "" || c.Name != "" || c.Image != "" {
		return c
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if m, err := l.MetaWait(ctx, l.Ref(pid, cg)); err == nil {
		c.Name, c.Image, c.PodName, c.PodNamespace = m.Name, m.Image, m.PodName, m.PodNamespace
	}
	return c
}

// reportWait bounds how long a report waits for runtimes to name the
// containers its findings are about, all together. Metadata is fetched in
// the background from a container's first sight, so on a short trace of
// a container that ran before it (-p, the whole host) the report is often
// the first to ask; containerd answers in milliseconds, and a runtime that
// hangs costs the report no more than this.
const reportWait = 2 * time.Second

// Describer names the containers of a report's processes (Describe),
// waiting, up to reportWait in all from its first call, for a runtime still
// fetching a container's name. For reports, not the event path.
func Describer(c Containers) func(pid uint32, cg uint64) string {
	var deadline time.Time
	var once sync.Once
	return func(pid uint32, cg uint64) string {
		w, ok := c.(interface {
			ContainerBy(pid uint32, cg uint64, deadline time.Time) filter.Container
		})
		if !ok {
			return Describe(c.Container(pid, cg))
		}
		once.Do(func() { deadline = time.Now().Add(reportWait) })
		return Describe(w.ContainerBy(pid, cg, deadline))
	}
}

// captured is one container of a capture's MetaContainers table.
type captured struct {
	filter.Container
	Cgroups []uint64 `json:"cgroups"`
	PIDs    []uint32 `json:"pids"`
}

// Snapshot describes every container now, for a capture header's
// MetaContainers. It waits up to 3 s for runtimes to name them.
func (l *Live) Snapshot() string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var out []captured
	for _, c := range l.t.Containers() {
		if !c.Ref.IsContainer() {
			continue
		}
		cc := captured{Container: filter.Container{ID: c.Ref.ID, Runtime: c.Ref.Runtime}, Cgroups: c.CgroupIDs, PIDs: c.PIDs}
		m, ok := c.Meta, c.HasMeta
		if !ok {
			if mm, err := l.t.MetaWait(ctx, c.Ref); err == nil {
				m, ok = mm, true
			}
		}
		if ok {
			cc.Name, cc.Image, cc.PodName, cc.PodNamespace = m.Name, m.Image, m.PodName, m.PodNamespace
		}
		out = append(out, cc)
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// Resolve turns --container ids (or 12-character prefixes) or names into
// cgroup v2 ids.
func (l *Live) Resolve(want []string) ([]uint64, error) {
	var ids []uint64
	for _, w := range want {
		var found bool
		for _, c := range l.t.Containers() {
			if !c.Ref.IsContainer() {
				continue
			}
			name := c.Meta.Name
			if !c.HasMeta {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				if m, err := l.t.MetaWait(ctx, c.Ref); err == nil {
					name = m.Name
				}
				cancel()
			}
			if c.Ref.ID == w || (len(w) >= 12 && strings.HasPrefix(c.Ref.ID, w)) || name == w {
				if len(c.CgroupIDs) == 0 {
					return nil, fmt.Errorf("--container %s: it has no cgroup v2 directory to select it by", w)
				}
				ids = append(ids, c.CgroupIDs...)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("--container %s: no such container running", w)
		}
	}
	return ids, nil
}

// Captured answers from a capture's MetaContainers table.
type Captured struct {
	byCgroup map[uint64]filter.Container
	byPID    map[uint32]filter.Container
}

// NewCaptured reads a MetaContainers value; one it cannot parse (or none)
// leaves every thread on the host until exec events say otherwise.
func NewCaptured(meta string) *Captured {
	c := &Captured{byCgroup: map[uint64]filter.Container{}, byPID: map[uint32]filter.Container{}}
	var list []captured
	if json.Unmarshal([]byte(meta), &list) == nil {
		for _, x := range list {
			for _, cg := range x.Cgroups {
				c.byCgroup[cg] = x.Container
			}
			for _, pid := range x.PIDs {
				c.byPID[pid] = x.Container
			}
		}
	}
	return c
}

// Observe learns the containers that started after the capture began from
// the cgroup paths of their exec events: their id and runtime, if not their
// image (that was only asked of the runtime at the start).
func (c *Captured) Observe(e *event.Event) {
	if e.Kind != event.KindExec {
		return
	}
	if _, ok := c.byCgroup[e.Cgroup]; ok {
		return
	}
	if r := container.Parse(e.Proc.CgroupPath); r.IsContainer() {
		c.byCgroup[e.Cgroup] = filter.Container{ID: r.ID, Runtime: r.Runtime}
	}
}

func (c *Captured) Container(pid uint32, cg uint64) filter.Container {
	if x, ok := c.byCgroup[cg]; ok {
		return x
	}
	return c.byPID[pid]
}

// Late is the live container table, made in the background: even making
// it reads a file, and on a host whose audit backlog is full every open
// waits. Exec events seen before it is ready are handed to it then.
type Late struct {
	mu      sync.Mutex
	l       *Live
	early   []event.Event
	ready   chan struct{}
	waited  sync.Once
	started sync.Once
	began   bool // under mu
	closed  bool
	make    func() *Live
}

func NewLate() *Late {
	return &Late{ready: make(chan struct{}), make: newLive}
}

// Start makes the table in the background. Until then (or if never) the
// container of a process is unknown.
func (c *Late) Start() {
	c.started.Do(func() {
		c.mu.Lock()
		c.began = true
		c.mu.Unlock()
		go c.build()
	})
}

func (c *Late) build() {
	l := c.make()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		l.Close()
		return
	}
	c.l = l
	for i := range c.early {
		l.Observe(&c.early[i])
	}
	c.early = nil
	close(c.ready)
}

// earlyMax bounds the exec events kept until the table is made.
const earlyMax = 4096

func (c *Late) Observe(e *event.Event) {
	if e.Kind != event.KindExec {
		return
	}
	c.mu.Lock()
	l := c.l
	if l == nil && len(c.early) < earlyMax {
		c.early = append(c.early, event.Event{Kind: e.Kind, PID: e.PID, Cgroup: e.Cgroup,
			Proc: event.Proc{CgroupPath: e.Proc.CgroupPath}})
	}
	c.mu.Unlock()
	if l != nil {
		l.Observe(e)
	}
}

// Container waits for the table a little, the first time (at the report).
func (c *Late) Container(pid uint32, cg uint64) filter.Container {
	c.waited.Do(func() {
		c.mu.Lock()
		began := c.began
		c.mu.Unlock()
		if !began {
			return // never made: the host was sick
		}
		select {
		case <-c.ready:
		case <-time.After(time.Second):
		}
	})
	c.mu.Lock()
	l := c.l
	c.mu.Unlock()
	if l == nil {
		return filter.Container{}
	}
	return l.Container(pid, cg)
}

// ContainerBy is Live's, once the table is made.
func (c *Late) ContainerBy(pid uint32, cg uint64, deadline time.Time) filter.Container {
	c.Container(pid, cg) // waits for the table, the first time
	c.mu.Lock()
	l := c.l
	c.mu.Unlock()
	if l == nil {
		return filter.Container{}
	}
	return l.ContainerBy(pid, cg, deadline)
}

func (c *Late) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.l != nil {
		c.l.Close()
	}
}

// Describe names a container for a report: "web (image, pod ns/pod)"; ""
// for the host.
func Describe(c filter.Container) string {
	if c.ID == "" {
		return ""
	}
	s := c.Name
	if s == "" {
		s = c.ID
		if len(s) > 12 {
			s = s[:12]
		}
	}
	var more []string
	if c.Image != "" {
		more = append(more, "image "+c.Image)
	}
	if c.PodName != "" {
		more = append(more, "pod "+c.PodNamespace+"/"+c.PodName)
	}
	if len(more) > 0 {
		s += " (" + strings.Join(more, ", ") + ")"
	}
	return s
}

// Label is the container column of a trace line (nil for no column).
func Label(c Containers) func(pid uint32, cg uint64) *output.Container {
	if c == nil {
		return nil
	}
	return func(pid uint32, cg uint64) *output.Container {
		x := c.Container(pid, cg)
		if x.ID == "" {
			return nil
		}
		return &output.Container{ID: x.ID, Name: x.Name, Image: x.Image, Runtime: x.Runtime, PodName: x.PodName, PodNamespace: x.PodNamespace}
	}
}
