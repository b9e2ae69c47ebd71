package main

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

// containers answers "which container is this event in?".
type containers interface {
	Container(pid uint32, cgroup uint64) filter.Container
}

// liveContainers asks the container table, which learns in the background,
// and remembers containers named by the cgroup paths of exec events.
type liveContainers struct {
	t *container.Table
	// seen holds containers learnt from exec events, by cgroup id: a
	// container that dies within milliseconds is gone before any refresh.
	mu   sync.RWMutex
	seen map[uint64]container.Ref
}

func newLiveContainers() *liveContainers {
	t := container.NewTable(container.Options{})
	select {
	case <-t.Ready():
	case <-time.After(2 * time.Second):
	}
	return &liveContainers{t: t, seen: map[uint64]container.Ref{}}
}

func (l *liveContainers) Close() { l.t.Close() }

// observe lets the table learn a container the moment its first process
// execs: a container that dies young may have no cgroup left by the time
// anyone asks which container it was.
func (l *liveContainers) observe(e *event.Event) {
	if e.Kind != event.KindExec {
		return
	}
	l.mu.RLock()
	_, ok := l.seen[e.Cgroup]
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
	}
	if _, ok := l.t.ByCgroup(e.Cgroup); !ok {
		l.t.Kick()
	}
}

func (l *liveContainers) Container(pid uint32, cg uint64) filter.Container {
	r := l.t.Lookup(pid, cg)
	if !r.IsContainer() {
		l.mu.RLock()
		seen, ok := l.seen[cg]
		l.mu.RUnlock()
		if !ok {
			return filter.Container{}
		}
		r = seen
	}
	c := filter.Container{ID: r.ID, Runtime: r.Runtime}
	if m, ok := l.t.Meta(r); ok {
		c.Name, c.Image, c.PodName, c.PodNamespace = m.Name, m.Image, m.PodName, m.PodNamespace
	}
	return c
}

// captured is the container table a capture carries, for reading it elsewhere.
type capturedContainer struct {
	filter.Container
	Cgroups []uint64 `json:"cgroups"`
	PIDs    []uint32 `json:"pids"`
}

const metaContainers = "containers"

// snapshot describes every container now, for a capture header.
func (l *liveContainers) snapshot() string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var out []capturedContainer
	for _, c := range l.t.Containers() {
		if !c.Ref.IsContainer() {
			continue
		}
		cc := capturedContainer{Container: filter.Container{ID: c.Ref.ID, Runtime: c.Ref.Runtime}, Cgroups: c.CgroupIDs, PIDs: c.PIDs}
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

// capturedContainers answers from a capture's table.
type capturedContainers struct {
	byCgroup map[uint64]filter.Container
	byPID    map[uint32]filter.Container
}

func newCapturedContainers(meta string) *capturedContainers {
	c := &capturedContainers{byCgroup: map[uint64]filter.Container{}, byPID: map[uint32]filter.Container{}}
	var list []capturedContainer
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

// observe learns the containers that started after the capture began from
// the cgroup paths of their exec events: their id and runtime, if not their
// image (that was only asked of the runtime at the start).
func (c *capturedContainers) observe(e *event.Event) {
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

func (c *capturedContainers) Container(pid uint32, cg uint64) filter.Container {
	if x, ok := c.byCgroup[cg]; ok {
		return x
	}
	return c.byPID[pid]
}

// resolveContainers turns --container ids or names into cgroup v2 ids.
func (l *liveContainers) resolve(want []string) ([]uint64, error) {
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

// label is the container column of a trace line.
func label(c containers) func(pid uint32, cg uint64) *output.Container {
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
