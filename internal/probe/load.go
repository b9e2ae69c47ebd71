package probe

import (
	"cmp"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// load creates the object's maps, then has the kernel verify its programs
// on as many CPUs as the process may use, and assigns them all to objs.
//
// The verifier is most of the start-up (bench/startup.sh), and the
// doctor's sys_enter and sys_exit most of the verifier's time. cilium/ebpf
// loads a collection's programs one after another; verified side by side
// the doctor attaches in about the time of its longest program. The kernel
// takes privileged loads in parallel (bpf_verifier_lock is held only for
// unprivileged ones).
//
// It returns the programs objs took, by name, for RunTimes, and a handle
// on the owner map (bpf/state.h) for a probe that takes over (Config.After).
func load(spec *ebpf.CollectionSpec, opts ebpf.CollectionOptions, objs *sysrayObjects) (map[string]*ebpf.Program, *ebpf.Map, error) {
	if opts.Cache == nil {
		opts.Cache = btf.NewCache() // decode the kernel's BTF once for every worker
	}
	// The maps first, .rodata among them: frozen before any program is
	// verified, so that the verifier prunes what the configuration turns off.
	mapsOnly := *spec
	mapsOnly.Programs = nil
	base, err := ebpf.NewCollectionWithOptions(&mapsOnly, opts)
	if err != nil {
		return nil, nil, err
	}
	defer base.Close() // what Assign takes is no longer the collection's
	owner, err := base.Maps[".data.owner"].Clone()
	if err != nil {
		return nil, nil, fmt.Errorf("the owner map: %w", err)
	}

	// Longest first, so that the longest walk starts at once and the
	// short ones fill the other CPUs around it. Instruction count stands in
	// for the walk's length: the verifier's cost is not known before it runs.
	names := make([]string, 0, len(spec.Programs))
	for name := range spec.Programs {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(spec.Programs[b].Instructions), len(spec.Programs[a].Instructions)), cmp.Compare(a, b))
	})

	workers := min(runtime.GOMAXPROCS(0), len(names))
	opts.MapReplacements = base.Maps
	var (
		mu    sync.Mutex
		progs = make(map[string]*ebpf.Program, len(names))
		errs  []error
		next  = make(chan string)
		wg    sync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range next {
				one := ebpf.CollectionSpec{
					Maps:      spec.Maps,
					Programs:  map[string]*ebpf.ProgramSpec{name: spec.Programs[name]},
					Types:     spec.Types,
					ByteOrder: spec.ByteOrder,
				}
				coll, err := ebpf.NewCollectionWithOptions(&one, opts)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					progs[name] = coll.Programs[name]
					delete(coll.Programs, name)
				}
				mu.Unlock()
				if coll != nil {
					coll.Close() // its clones of the maps
				}
			}
		}()
	}
	for _, name := range names {
		next <- name
	}
	close(next)
	wg.Wait()
	whole := &ebpf.Collection{Maps: base.Maps, Programs: progs, Variables: base.Variables}
	if len(errs) > 0 {
		for _, p := range progs {
			p.Close()
		}
		owner.Close()
		return nil, nil, errs[0]
	}
	taken := maps.Clone(progs)
	if err := whole.Assign(objs); err != nil {
		for _, p := range progs {
			p.Close()
		}
		owner.Close()
		return nil, nil, fmt.Errorf("assigning BPF objects: %w", err)
	}
	// Assign took what objs names; anything else is closed with base or here.
	for name, p := range whole.Programs {
		delete(taken, name)
		p.Close()
	}
	return taken, owner, nil
}
