package probe

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/sysray/sysray/internal/stat"
)

// Stats reads the syscall counts the kernel keeps in stat mode, summed
// over CPUs, and how many calls found no cell.
func (p *Probe) Stats() ([]stat.Cell, stat.Lost, error) {
	if p.budget {
		if err := p.flushPending(); err != nil {
			return nil, stat.Lost{}, err
		}
	}
	errs := map[[2]uint32]map[int]uint64{}
	var ek sysrayErrnoKey
	var en []uint64
	it := p.objs.Errnos.Iterate()
	for it.Next(&ek, &en) {
		k := [2]uint32{ek.Pid, ek.Nr}
		if errs[k] == nil {
			errs[k] = map[int]uint64{}
		}
		for _, n := range en {
			errs[k][int(ek.Err)] += n
		}
	}
	if err := it.Err(); err != nil {
		return nil, stat.Lost{}, err
	}
	p.statMu.Lock()
	defer p.statMu.Unlock()
	out := make([]stat.Cell, 0, p.lastCells+p.lastCells/8)
	add := func(k *sysrayStatKey, vals []sysrayStatVal) {
		c := sumCell(k, vals)
		c.Errnos = errs[[2]uint32{k.Pid, k.Nr}]
		out = append(out, c)
	}
	if err := p.statBatches(add); err != nil {
		// Batch lookups are newer than the rest (Linux 5.6): read the
		// table one cell at a time.
		out = out[:0]
		var k sysrayStatKey
		var vals []sysrayStatVal
		it := p.objs.Stats.Iterate()
		for it.Next(&k, &vals) {
			add(&k, vals)
		}
		if err := it.Err(); err != nil {
			return nil, stat.Lost{}, err
		}
	}
	out, err := p.addSpill(out, errs)
	if err != nil {
		return nil, stat.Lost{}, err
	}
	p.lastCells = len(out)
	lost, err := p.lost()
	if err != nil {
		// Counts whose losses cannot be read would pass for whole.
		return nil, stat.Lost{}, err
	}
	return out, lost, nil
}

// lost reads stat_lost, summed over CPUs.
func (p *Probe) lost() (stat.Lost, error) {
	var per []sysrayLost
	var l stat.Lost
	if err := p.objs.StatLost.Lookup(uint32(0), &per); err != nil {
		return l, fmt.Errorf("reading the count of uncounted calls: %w", err)
	}
	for _, v := range per {
		l.Full += v.Full
		l.NoMem += v.Nomem
	}
	return l, nil
}

// sumCell sums a cell's per-CPU values (of the stats map or the spill).
func sumCell(k *sysrayStatKey, vals []sysrayStatVal) stat.Cell {
	c := stat.Cell{Key: stat.Key{PID: k.Pid, Nr: k.Nr, Cgroup: k.Cgroup}}
	for i := range vals {
		v := &vals[i]
		c.Count += v.Count
		c.Errors += v.Errors
		c.Total += v.Total
		c.Runq += v.Runq
		c.Timed += v.Timed
		c.Max = max(c.Max, v.Max)
		for i, n := range v.Hist {
			c.Hist[i] += uint64(n)
		}
	}
	return c
}

// SpillMax bounds the spill's cells on any host (spillCells).
const SpillMax = 8192

// spillCells sizes the spill (bpf/maps.h), whose per-CPU cells are
// allocated when it is made: as many as 8 MiB holds (6,096 on 2 CPUs, 1,524
// on 8), at most SpillMax and at least 64; one outside stat mode.
//
// How many cells want it depends on how long the kernel's workers take to
// refill its per-CPU allocator under the burst that empties it: 25 to 277
// for 1,100 processes making 33 cells each at once on this 2-CPU VM, and
// on CI's, by inference, over 6,000 (TestStatUncountedExact lost 8,699
// calls there, 5,167 more than the full table explains with 1,024 cells
// spilled, before the two causes were counted apart; with 6,096, the
// doctor lost none of the same burst there: the spill, by inference, took
// the 3,532 the table would have refused, and more). Making 6,096 cells
// rather than 1,024 as sysray starts delayed its attaching by about 10 ms
// (medians of 6 interleaved starts, 550 against 540 ms; means 561 and 542).
func spillCells(stat bool, ncpu int) uint32 {
	if !stat {
		return 1
	}
	size := int(unsafe.Sizeof(sysrayStatVal{}))
	return uint32(min(max((8<<20)/(size*ncpu), 64), SpillMax))
}

// addSpill adds the spill's cells (bpf/maps.h) to out, each to its key's
// cell if out has one.
func (p *Probe) addSpill(out []stat.Cell, errs map[[2]uint32]map[int]uint64) ([]stat.Cell, error) {
	var k sysrayStatKey
	var vals []sysrayStatVal
	var at map[stat.Key]int
	it := p.objs.Spill.Iterate()
	for it.Next(&k, &vals) {
		if at == nil {
			at = make(map[stat.Key]int, len(out))
			for i := range out {
				at[out[i].Key] = i
			}
		}
		c := sumCell(&k, vals)
		if i, ok := at[c.Key]; ok {
			out[i].Merge(&c)
		} else {
			c.Errnos = errs[[2]uint32{k.Pid, k.Nr}]
			at[c.Key] = len(out)
			out = append(out, c)
		}
	}
	return out, it.Err()
}

// statBatch is how many cells one batch lookup reads.
const statBatch = 512

// statBatches hands every cell of the count table to add, read in batches
// into buffers kept for the next read.
func (p *Probe) statBatches(add func(*sysrayStatKey, []sysrayStatVal)) error {
	return perCPUBatches(p.objs.Stats, &p.statKeys, &p.statVals, add)
}

// perCPUBatches hands every entry of the per-CPU hash m to add, read
// statBatch at a time into *keys and *vals, which are kept for the next
// read (per-CPU values land in them without a copy when V is a multiple
// of 8 bytes, as the kernel lays out each CPU's value).
func perCPUBatches[K, V any](m *ebpf.Map, keys *[]K, vals *[]V, add func(*K, []V)) error {
	ncpu, err := possibleCPUs()
	if err != nil {
		return err
	}
	if len(*vals) != statBatch*ncpu {
		*keys = make([]K, statBatch)
		*vals = make([]V, statBatch*ncpu)
	}
	ks, vs := *keys, *vals
	var cursor ebpf.MapBatchCursor
	for {
		n, err := m.BatchLookup(&cursor, ks, vs, nil)
		for i := 0; i < n; i++ {
			add(&ks[i], vs[i*ncpu:(i+1)*ncpu])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Counts are a process's page faults and legacy vsyscall emulations (stat mode).
type Counts struct {
	Faults, Vsyscalls uint64
}

// ProcCounts reads the per-process counts, summed over CPUs, in batches
// as Stats reads its cells: iterated, each process cost two bpf() calls,
// and on a host starting hundreds of processes a second the agent's reads
// spent 5% of its CPU there.
func (p *Probe) ProcCounts() (map[uint32]Counts, error) {
	p.statMu.Lock()
	defer p.statMu.Unlock()
	out := map[uint32]Counts{}
	add := func(pid *uint32, vals []sysrayPcount) {
		var c Counts
		for _, v := range vals {
			c.Faults += v.Faults
			c.Vsyscalls += v.Vsyscalls
		}
		out[*pid] = c
	}
	if err := perCPUBatches(p.objs.Pcounts, &p.pcKeys, &p.pcVals, add); err != nil {
		// As Stats: one process at a time where batches are refused.
		clear(out)
		var pid uint32
		var vals []sysrayPcount
		it := p.objs.Pcounts.Iterate()
		for it.Next(&pid, &vals) {
			add(&pid, vals)
		}
		return out, it.Err()
	}
	return out, nil
}

// Forget deletes the counts of the given processes from the kernel's
// tables (stat mode). The tables keep a cell for every process that ever
// made a call until the probe is reloaded; a reader that has read the
// last counts of processes that exited forgets them, so the tables (and
// every later read) hold the living. It returns how many entries went.
func (p *Probe) Forget(pids map[uint32]bool) (int, error) {
	if len(pids) == 0 {
		return 0, nil
	}
	n := deleteKeys(p.objs.Stats, func(k *sysrayStatKey) bool { return pids[k.Pid] })
	n += deleteKeys(p.objs.Spill, func(k *sysrayStatKey) bool { return pids[k.Pid] })
	n += deleteKeys(p.objs.Errnos, func(k *sysrayErrnoKey) bool { return pids[k.Pid] })
	for pid := range pids {
		if p.objs.Pcounts.Delete(pid) == nil {
			n++
		}
	}
	return n, nil
}

// ForgetCells deletes the given cells, just read with Stats, from the
// kernel's count table, with their processes' errno counts and page-fault
// counts, and returns the cells that went: their counts are no longer in
// the table, and a later call under the same key starts a cell of its own.
// A reader that keeps them lets a table hold the living on a host whose
// processes come and go (the live doctor lets go of ended processes).
func (p *Probe) ForgetCells(cells []stat.Cell) ([]stat.Cell, error) {
	if len(cells) == 0 {
		return nil, nil
	}
	keys := make([]sysrayStatKey, len(cells))
	for i := range cells {
		keys[i] = sysrayStatKey{Cgroup: cells[i].Cgroup, Pid: cells[i].PID, Nr: cells[i].Nr}
	}
	// A cell read with Stats may be the sum of the stats map's cell and
	// the spill's under its key: it went if either did.
	went := make([]bool, len(cells))
	err := batchDelete(p.objs.Stats, keys, func(i int) { went[i] = true })
	if err == nil {
		// Only once every main part went (or had none): a cell whose
		// main part stayed must not be kept whole. The spill is nearly
		// always empty: walk it, rather than try every key (a
		// batch stops at each key that is not there).
		idx := make(map[sysrayStatKey]int, len(keys))
		for i, k := range keys {
			idx[k] = i
		}
		var k, next sysrayStatKey
		var spilled []sysrayStatKey
		for e := p.objs.Spill.NextKey(nil, &next); e == nil; e = p.objs.Spill.NextKey(&k, &next) {
			k = next
			if _, ok := idx[k]; ok {
				spilled = append(spilled, k)
			}
		}
		// (A delete of a key just listed does not fail; one that did would
		// leave a spill part read again and kept in its sum.)
		for i := range spilled {
			if p.objs.Spill.Delete(&spilled[i]) == nil {
				went[idx[spilled[i]]] = true
			}
		}
	}
	gone := make([]stat.Cell, 0, len(cells))
	for i := range cells {
		if went[i] {
			gone = append(gone, cells[i])
		}
	}
	var ekeys []sysrayErrnoKey
	pids := map[uint32]bool{}
	for _, c := range gone {
		pids[c.PID] = true
		for e := range c.Errnos {
			ekeys = append(ekeys, sysrayErrnoKey{Pid: c.PID, Nr: c.Nr, Err: int32(e)})
		}
	}
	// Errno cells are keyed without the cgroup: two cells of one process
	// and syscall (a cgroup move) name the same ones, and the second
	// delete finds them gone.
	_ = batchDelete(p.objs.Errnos, ekeys, nil)
	pkeys := make([]uint32, 0, len(pids))
	for pid := range pids {
		pkeys = append(pkeys, pid)
	}
	_ = batchDelete(p.objs.Pcounts, pkeys, nil)
	return gone, err
}

// batchDelete deletes keys from m, a batch at a time, calling deleted with
// the index of each key that went. A key that is not there (ENOENT) stops a
// batch in the kernel; it is stepped over. Kernels without batch deletes
// (before 5.6) get one delete per key.
func batchDelete[K any](m *ebpf.Map, keys []K, deleted func(int)) error {
	for i := 0; i < len(keys); {
		n, err := m.BatchDelete(keys[i:], nil)
		if deleted != nil {
			for j := i; j < i+n; j++ {
				deleted(j)
			}
		}
		i += n
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ebpf.ErrKeyNotExist):
			i++ // keys[i] was not there
		case errors.Is(err, ebpf.ErrNotSupported):
			for ; i < len(keys); i++ {
				if m.Delete(&keys[i]) == nil && deleted != nil {
					deleted(i)
				}
			}
		default:
			return err
		}
	}
	return nil
}

// deleteKeys deletes the keys of m that doomed picks and says how many went.
// The keys are collected first: deleting while walking a hash map makes the
// walk start over.
func deleteKeys[K any](m *ebpf.Map, doomed func(*K) bool) int {
	var k, next K
	var keys []K
	for err := m.NextKey(nil, &next); err == nil; err = m.NextKey(&k, &next) {
		k = next
		if doomed(&k) {
			keys = append(keys, k)
		}
	}
	n := 0
	for i := range keys {
		if m.Delete(&keys[i]) == nil {
			n++
		}
	}
	return n
}

// flushPending has the kernel add the counts threads keep pending under
// budgeted timing (bpf/stat.h, PEND_SLOTS) to the count table, so a read
// misses none. Once the probe is detached none is left behind; while it
// runs, a slot whose thread counts into it at that moment waits for the
// thread's next timed call of that syscall (within a tick) or the next read.
func (p *Probe) flushPending() error {
	if err := walkTasks(p.objs.FlushPending); err != nil {
		return fmt.Errorf("reading pending syscall counts: %w", err)
	}
	return nil
}
