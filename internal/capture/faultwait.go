package capture

import "github.com/sysray/sysray/internal/event"

// appendFaultWait encodes kind 13's body (docs/capture-format.md): the
// window, its places, then the memory cgroup's facts when they were read.
func appendFaultWait(b []byte, w *event.FaultWait) []byte {
	b = appendUvarint(b, w.Start)
	b = appendUvarint(b, w.Duration)
	b = appendUvarint(b, uint64(w.Count))
	b = appendUvarint(b, w.MajFaults)
	b = appendUvarint(b, w.MinFaults)
	b = appendUvarint(b, w.Lo)
	b = appendUvarint(b, w.Hi)
	b = appendUvarint(b, uint64(len(w.Places)))
	for i := range w.Places {
		p := &w.Places[i]
		b = appendUvarint(b, p.Duration)
		b = appendUvarint(b, uint64(p.Count))
		b = appendUvarint(b, p.Addr)
		b = appendFrames(b, p.Stack)
		b = appendUvarint(b, p.Map.Start)
		b = appendUvarint(b, p.Map.End)
		b = appendUvarint(b, p.Map.Offset)
		b = appendUvarint(b, p.Map.Inode)
		b = appendBytes(b, []byte(p.Map.Path))
	}
	if !w.Mem.Read {
		return b
	}
	m := &w.Mem
	host := uint64(0)
	if m.Host {
		host = 1
	}
	b = appendUvarint(b, host)
	b = appendBytes(b, []byte(m.Cgroup))
	b = appendUvarint(b, m.Max)
	b = appendUvarint(b, m.High)
	b = appendUvarint(b, m.Current)
	b = appendUvarint(b, m.RefaultFile)
	return appendUvarint(b, m.RefaultAnon)
}

func (d *blockDecoder) faultWait(w *event.FaultWait) {
	w.Start = d.uvarint()
	w.Duration = d.uvarint()
	w.Count = d.u32()
	w.MajFaults = d.uvarint()
	w.MinFaults = d.uvarint()
	w.Lo = d.uvarint()
	w.Hi = d.uvarint()
	n := d.uvarint()
	// every place takes at least nine bytes
	if n > uint64(len(d.buf)-d.pos) {
		d.fail("list length beyond the record")
		return
	}
	if n > 0 {
		w.Places = make([]event.FaultPlace, n)
	}
	for i := range w.Places {
		p := &w.Places[i]
		p.Duration = d.uvarint()
		p.Count = d.u32()
		p.Addr = d.uvarint()
		p.Stack = d.frames()
		p.Map.Start = d.uvarint()
		p.Map.End = d.uvarint()
		p.Map.Offset = d.uvarint()
		p.Map.Inode = d.uvarint()
		p.Map.Path = d.string()
	}
	if d.pos >= len(d.buf) || d.bad != "" {
		return // the memory cgroup was not read
	}
	m := &w.Mem
	m.Read = true
	m.Host = d.uvarint() != 0
	m.Cgroup = d.string()
	m.Max = d.uvarint()
	m.High = d.uvarint()
	m.Current = d.uvarint()
	m.RefaultFile = d.uvarint()
	m.RefaultAnon = d.uvarint()
}
