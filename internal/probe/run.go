package probe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/sysray/sysray/internal/event"
)

// Records are stamped when taken, not when committed to the ring; slack is
// how long a record may lag its stamp (a preempted BPF program) and still be
// put in order.
const slack = uint64(5 * time.Millisecond)

// pauseSleep is a reader's first sleep once it finds the per-syscall
// programs paused: twice the slack, so that the mark of its next drain
// passes the pause by at least the slack.
const pauseSleep = 2 * time.Duration(slack)

// How long a reader sleeps on an idle ring by default. The kernel wakes it sooner once
// an eighth of the ring is full. Short enough that events reach consumers
// while their processes are usually still alive (to read their maps).
const idlePoll = 5 * time.Millisecond

// burstRate is the fastest a ring is assumed to fill from idle, in bytes a
// second: a CPU making a million 136-byte records a second, which only a
// tight loop of failing calls comes near. A reader of an idle ring sleeps
// no longer than a quarter of its ring takes at that rate (10 ms for the
// agent's 4 MiB rings; record's 32 MiB ones wait the 5 ms poll).
const burstRate = 100e6

// A batch holds a ring's records as read, not decoded: the merger decodes
// each into one event when it emits it. Decoded by the readers, a batch was
// thousands of 624-byte events, written on one CPU and read cold on another
// by the merger and by every consumer after it; under redis, record spent
// more time on those cache misses than on any one piece of its work.
type batch struct {
	ring int
	recs []rec  // in ring order
	buf  []byte // the records' bytes
	mark uint64 // every record of this ring stamped before mark has been read
	err  error
	done bool
	next int // merger: index of the next record to emit

	// order, when not empty, is the order of recs by end (sortByEnd);
	// keys is its scratch. Both are kept with the batch.
	order []int32
	keys  []endKey
}

// rec is one record of a batch.
type rec struct {
	end      uint64 // when it was submitted (a syscall's exit): the merge order
	off, len uint32 // its bytes in the batch's buf
}

// at is the batch's j-th record in end order.
func (b *batch) at(j int) *rec {
	if len(b.order) > 0 {
		return &b.recs[b.order[j]]
	}
	return &b.recs[j]
}

// add appends a record read from the ring, which the caller has checked
// holds at least a header. inPlace says the ring's reader already put it
// at the end of the batch's buf, past its length.
func (b *batch) add(raw []byte, inPlace bool) {
	end := le.Uint64(raw[16:])
	if event.Kind(raw[0]) == event.KindSyscall && len(raw) >= sysSize {
		end += le.Uint64(raw[48:]) // its latency, as event.End adds it
	}
	b.recs = append(b.recs, rec{end: end, off: uint32(len(b.buf)), len: uint32(len(raw))})
	if inPlace {
		b.buf = b.buf[:len(b.buf)+len(raw)]
	} else {
		b.buf = append(b.buf, raw...)
	}
}

// Run reads events until ctx is done, then detaches, drains the rings and
// returns. fn sees events in time order (by syscall exit for syscalls), from a
// single goroutine; the event is valid until fn returns, and the next one
// reuses it, so fn copies what it keeps. onDrop, if not nil, is called when
// the kernel lost events.
//
// The capture ends at one instant, the cut, taken when ctx is done: fn sees
// nothing that began after it, and a syscall in flight at the cut is
// unfinished, lasting until the cut, however the kernel reported it. The
// programs stop one at a time, and closing a link took up to 80 ms under
// load: without the cut, a call could end while sys_exit was still attached
// and the thread's next call begin once sys_enter was not, so that a thread
// inside a syscall at the end looked idle.
func (p *Probe) Run(ctx context.Context, fn func(*event.Event) error, onDrop func(cpu int, n uint64)) error {
	readers := make([]*ringbuf.Reader, len(p.rings))
	for i, m := range p.rings {
		rd, err := ringbuf.NewReader(m)
		if err != nil {
			for _, r := range readers[:i] {
				r.Close()
			}
			return err
		}
		readers[i] = rd
	}
	defer func() {
		for _, r := range readers {
			r.Close()
		}
	}()

	batches := make(chan *batch, 4*len(readers))
	var draining sync.WaitGroup
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, rd := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			readRing(i, rd, stop, batches, p.poll, p.Quiet)
		}()
	}
	go func() {
		wg.Wait()
		close(batches)
	}()

	m := newMerger(len(readers), fn, p.stack)
	// Take the cut, stop the producers, then tell the readers to drain
	// what is left.
	draining.Add(1)
	go func() {
		defer draining.Done()
		<-ctx.Done()
		m.stop()
		p.Detach()
		close(stop)
	}()

	ticker := time.NewTicker(250 * time.Millisecond)
	defer ticker.Stop()
	var lastDrops []uint64
	checkDrops := func() {
		per, err := p.Drops()
		if err != nil {
			return
		}
		if lastDrops == nil {
			lastDrops = make([]uint64, len(per))
		}
		for cpu, n := range per {
			if cpu < len(lastDrops) && n > lastDrops[cpu] {
				d := n - lastDrops[cpu]
				lastDrops[cpu] = n
				if onDrop != nil {
					onDrop(cpu, d)
				}
				m.inject(event.Event{Kind: event.KindDrop, CPU: uint32(cpu), Time: monoNow(), Drop: event.Drop{Count: d}})
			}
		}
	}
	var futexes futexReader
	readFutexes := func() {
		at := monoNow()
		if cut := m.cut.Load(); cut != 0 && cut != cutting && cut < at {
			at = cut // the last read, after the cut: its sums end there
		}
		p.readFutexes(&futexes, at, m.inject)
	}
	var ferr error
loop:
	for {
		select {
		case b, ok := <-batches:
			if !ok {
				break loop
			}
			if b.err != nil && ferr == nil {
				ferr = b.err
			}
			if err := m.add(b); err != nil && ferr == nil {
				ferr = err
			}
		case <-ticker.C:
			checkDrops()
			readFutexes()
		}
	}
	checkDrops()
	readFutexes()
	if err := m.flush(); err != nil && ferr == nil {
		ferr = err
	}
	if ferr == nil {
		ferr = m.decodeErr
	}
	draining.Wait()
	return ferr
}

const batchLen = 4096

// batches are recycled, so that reading a ring allocates nothing per
// record on the hot path. A syscall record is 136 bytes, more with data.
var batchPool = sync.Pool{New: func() any {
	return &batch{recs: make([]rec, 0, batchLen), buf: make([]byte, 0, batchLen*(sysSize+32))}
}}

func newBatch(ring int) *batch {
	b := batchPool.Get().(*batch)
	b.ring, b.recs, b.buf, b.mark, b.err, b.done, b.next, b.order = ring, b.recs[:0], b.buf[:0], 0, nil, false, 0, b.order[:0]
	return b
}

type endKey struct {
	end uint64
	i   int32
}

// sortByEnd orders the batch's records by the time they were submitted,
// keeping the order of equal ones, without moving them: sorting decoded
// events, hundreds of bytes each, by swapping them spent a fifth of record's
// CPU on redis (perf record -g of sysray), and moving each once still a
// tenth. So it sorts small keys, and the merger reads through the order.
func (b *batch) sortByEnd() {
	keys := b.keys[:0]
	for i := range b.recs {
		keys = append(keys, endKey{b.recs[i].end, int32(i)})
	}
	// Insertion sort: a batch is sorted runs with short excursions (a
	// staged run flushed a few dozen records late), which it orders in a
	// pass, stably. Its cost grows with how far records are out of place,
	// so past a budget the rest goes to the library's stable sort.
	moves, budget := 0, 64*len(keys)
	for i := 1; i < len(keys); i++ {
		k := keys[i]
		j := i
		for j > 0 && keys[j-1].end > k.end {
			keys[j] = keys[j-1]
			j--
		}
		keys[j] = k
		if moves += i - j; moves > budget {
			slices.SortStableFunc(keys, func(x, y endKey) int { return cmp.Compare(x.end, y.end) })
			break
		}
	}
	order := b.order[:0]
	for _, k := range keys {
		order = append(order, k.i)
	}
	b.keys, b.order = keys, order
}

// sort puts the batch in end order, as the merger takes it. A ring is nearly
// in order already; it sorts only when it is not.
func (b *batch) sort() {
	if !sorted(b.recs) {
		b.sortByEnd()
	}
}

func sorted(recs []rec) bool {
	for i := 1; i < len(recs); i++ {
		if recs[i].end < recs[i-1].end {
			return false
		}
	}
	return true
}

// readRing drains ring i into batches of records.
//
// It waits in Go, not in the kernel: a reader blocked in epoll_wait again and
// again holds a thread in a syscall, which Go's scheduler hands off and then
// polls for every 20 µs. Under a busy tracee that churn took a third of the
// reader's CPU, on the tracee's own CPUs; an idle ring's reader blocking
// every poll brought half of it back. So every reader drains its ring
// without blocking and sleeps on a Go timer, and the kernel's wakeups go
// unused. The sleep is poll at most, less when a quarter of the ring would
// fill in it: at the rate just seen, or at burstRate for a ring that was
// idle, since no wakeup can end the sleep of a reader the events surprise.
//
// While the per-syscall programs are paused (the agent's duty cycling), a
// ring fills only from the rest, which emit per process, fault or signal,
// far below burstRate: quiet says so, and gives the channel their resume
// closes. The reader then sleeps its whole poll, or until the resume.
// Capped at the burst's 10 ms, an idle agent's two readers woke it 200
// times a second, and the merger as often. But its first sleep after a
// pause is short (pauseSleep): the merger emits a call only once every
// ring's mark has passed it, and the mark of a drain made just after the
// pause lags it by the slack. A reader that then slept its whole poll held
// the paused stretch's last calls back by as long, past the agent's drain
// (agent.dutyDrain), into the doctor's next window.
func readRing(i int, rd *ringbuf.Reader, stop <-chan struct{}, out chan<- *batch, poll time.Duration, quiet func() (bool, <-chan struct{})) {
	if poll <= 0 {
		poll = idlePoll
	}
	quarter := rd.BufferSize() / 4
	var sample ringbuf.Record
	b := newBatch(i)
	send := func(mark uint64, done bool) {
		b.mark, b.done = mark, done
		b.sort()
		out <- b
		b = newBatch(i)
	}
	timer := time.NewTimer(poll)
	timer.Stop()
	last := time.Now()
	stopping := false
	wasCalm := false
	for {
		rd.SetDeadline(time.Now()) // read what is there; do not wait
		var err error
		read := 0
		for {
			// Read into the batch's spare room: a sample that fits is
			// copied once, out of the ring, and not again into the batch.
			n := len(b.buf)
			sample.RawSample = b.buf[n:n]
			if err = rd.ReadInto(&sample); err != nil {
				break
			}
			// A sample is one record, or a batch of staged syscall records.
			raw := sample.RawSample
			read += len(raw)
			inPlace := len(raw) > 0 && cap(b.buf)-n >= len(raw) && &b.buf[:n+1][n] == &raw[0]
			for len(raw) >= hdrSize {
				size := int(le.Uint16(raw[2:]))
				if size < hdrSize || size > len(raw) {
					b.err = fmt.Errorf("ring %d: record of %d bytes in a sample of %d", i, size, len(raw))
					break
				}
				b.add(raw[:size], inPlace)
				raw = raw[size:]
			}
			// Only between samples: the rest of a sample read in place
			// lies in this batch's memory, which the merger recycles.
			if len(b.recs) >= batchLen {
				send(sub(b.recs[len(b.recs)-1].end, slack), false)
			}
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			// Closed or broken ring: report and stop this reader.
			b.err = err
			send(math.MaxUint64, true)
			return
		}
		if stopping {
			send(math.MaxUint64, true)
			return
		}
		// The ring was just found empty: everything stamped well before now has been read.
		send(sub(monoNow(), slack), false)
		now := time.Now()
		el := now.Sub(last)
		last = now
		calm, resumed := quiet()
		wait := poll
		if !calm {
			wait = min(poll, time.Duration(float64(quarter)/burstRate*float64(time.Second)))
		} else if !wasCalm {
			wait = min(poll, pauseSleep)
		}
		wasCalm = calm
		if read > 0 && el > 0 {
			wait = min(wait, time.Duration(float64(el)*float64(quarter)/float64(read)))
		}
		if wait < 100*time.Microsecond {
			select {
			case <-stop:
				stopping = true
			default:
			}
			continue
		}
		timer.Reset(wait)
		select {
		case <-stop:
			stopping = true
			timer.Stop()
		case <-resumed:
			timer.Stop()
		case <-timer.C:
		}
	}
}

// Quiet says whether the per-syscall programs are paused (PauseSyscalls),
// and gives the channel their next resume closes. The channel is loaded
// first: ResumeSyscalls clears quiet before it swaps the channel, so a
// caller that sees quiet has the channel the resume will close.
func (p *Probe) Quiet() (bool, <-chan struct{}) {
	c := *p.resumed.Load()
	return p.quiet.Load(), c
}

func sub(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}

// merger puts the per-CPU streams back in time order.
type merger struct {
	// cut is when the capture ended (monotonic ns): 0 while it runs,
	// cutting while stop takes the time.
	cut    atomic.Uint64
	queues [][]*batch // per ring, batches not yet fully emitted
	marks  []uint64
	fn     func(*event.Event) error
	extra  []event.Event // injected events (drops)

	// Records are decoded into ev, one at a time, as they are emitted.
	ev        event.Event
	comms     comms
	stacks    stackFunc
	decodeErr error // the first record that would not decode
	execs     map[uint32]string
	recent    map[uint32][]event.RecentCall // by tid, until the thread's exit event
	arch      event.Arch
	execNr    [2]uint32
}

func newMerger(n int, fn func(*event.Event) error, stacks stackFunc) *merger {
	arch := event.HostArch()
	m := &merger{queues: make([][]*batch, n), marks: make([]uint64, n), fn: fn, stacks: stacks, execs: map[uint32]string{}, recent: map[uint32][]event.RecentCall{}, arch: arch}
	m.execNr[0], _ = event.SyscallByName(arch, "execve")
	m.execNr[1], _ = event.SyscallByName(arch, "execveat")
	return m
}

func (m *merger) inject(e event.Event) { m.extra = append(m.extra, e) }

func (m *merger) add(b *batch) error {
	if b.mark > m.marks[b.ring] {
		m.marks[b.ring] = b.mark
	}
	if len(b.recs) > 0 {
		m.queues[b.ring] = append(m.queues[b.ring], b)
	} else {
		batchPool.Put(b)
	}
	return m.emitReady(false)
}

func (m *merger) flush() error { return m.emitReady(true) }

// head is the next record of ring i, or nil.
func (m *merger) head(i int) *rec {
	q := m.queues[i]
	if len(q) == 0 {
		return nil
	}
	return q[0].at(q[0].next)
}

func (m *merger) pop(i int) {
	q := m.queues[i]
	q[0].next++
	if q[0].next == len(q[0].recs) {
		batchPool.Put(q[0])
		q[0] = nil
		m.queues[i] = q[1:]
	}
}

func (m *merger) emitReady(all bool) error {
	for i := range m.extra {
		if err := m.emit(&m.extra[i]); err != nil {
			return err
		}
	}
	m.extra = m.extra[:0]
	for {
		best := -1
		var bestKey uint64
		for i := range m.queues {
			if h := m.head(i); h != nil {
				if k := h.end; best < 0 || k < bestKey {
					best, bestKey = i, k
				}
			}
		}
		if best < 0 {
			return nil
		}
		// What holds best's run back: the next record of every other
		// ring (the lowest ring first among equal ones) and, unless all
		// goes, the mark of every ring with nothing queued, which might
		// still hold an older record it has not read. The run goes out
		// without a scan of every ring per record, which on a host of
		// many CPUs would be most of the merger's work.
		head, headRing, mark := uint64(math.MaxUint64), len(m.queues), uint64(math.MaxUint64)
		for i := range m.queues {
			if i == best {
				continue
			}
			if h := m.head(i); h != nil {
				if h.end < head {
					head, headRing = h.end, i
				}
			} else if !all {
				mark = min(mark, m.marks[i])
			}
		}
		for {
			b, r := m.queues[best][0], m.head(best)
			if r.end > head || (r.end == head && headRing < best) {
				break // another ring's turn
			}
			if r.end > mark {
				return nil
			}
			if err := decode(b.buf[r.off:r.off+r.len], &m.ev, &m.comms, m.stacks); err != nil {
				if m.decodeErr == nil {
					m.decodeErr = fmt.Errorf("ring %d: %w", b.ring, err)
				}
			} else if err := m.emit(&m.ev); err != nil {
				return err
			}
			m.pop(best)
			if len(m.queues[best]) == 0 {
				break
			}
		}
	}
}

const cutting = math.MaxUint64

// stop takes the cut. The mark goes first, so an event the merger emitted
// without seeing it had been read, and so stamped, before the time taken.
func (m *merger) stop() {
	m.cut.Store(cutting)
	m.cut.Store(monoNow())
}

func (m *merger) cutAt() uint64 {
	for {
		if c := m.cut.Load(); c != cutting {
			return c
		}
		runtime.Gosched()
	}
}

func (m *merger) emit(e *event.Event) error {
	if cut := m.cutAt(); cut != 0 && e.Kind != event.KindDrop && e.End() > cut {
		if e.Time > cut || e.Kind != event.KindSyscall {
			return nil
		}
		cutOff(&e.Syscall, cut-e.Time)
	}
	switch e.Kind {
	case event.KindRecent:
		m.recent[e.TID] = e.Proc.Recent
		return nil
	case event.KindExit:
		if r, ok := m.recent[e.TID]; ok {
			e.Proc.Recent = r
			delete(m.recent, e.TID)
		}
	case event.KindExec:
		m.execs[e.TID] = e.Proc.Filename
	case event.KindSyscall:
		// The kernel cannot read a successful execve's path: the memory it
		// pointed to is gone. The exec record just before names the file.
		s := &e.Syscall
		if s.Ret == 0 && !s.Unfinished && (s.Nr == m.execNr[0] || s.Nr == m.execNr[1]) {
			arg := 0
			if s.Nr == m.execNr[1] {
				arg = 1
			}
			if f, ok := m.execs[e.TID]; ok && s.Data[arg] == nil {
				s.Data[arg] = []byte(f)
				delete(m.execs, e.TID)
			}
		}
	}
	return m.fn(e)
}

// cutOff makes a syscall in flight at the cut what the kernel reports for a
// call in flight when tracing stops: unfinished, lasting until then, with
// nothing from its return (result, copied data, where it slept).
func cutOff(s *event.Syscall, latency uint64) {
	*s = event.Syscall{Nr: s.Nr, Args: s.Args, Latency: latency, Unfinished: true, Approx: s.Approx}
}

func monoNow() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
