package scap

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/sysray/sysray/internal/event"
)

// Any bytes, read as a scap file (gzip or not), give events, a partial
// read or an error, never a panic.
func FuzzRead(f *testing.F) {
	for _, name := range fixtures {
		z, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(z)
		b := raw(f, name)
		// The section header and the first event blocks alone: small
		// seeds the fuzzer mutates quickly (the whole files, up to 250
		// KiB decompressed, are the gzip seeds above).
		shb := binary.LittleEndian.Uint32(b[4:])
		small := append([]byte(nil), b[:shb]...)
		for off, n := int(shb), 0; off+8 <= len(b) && n < 12; {
			l := int(binary.LittleEndian.Uint32(b[off+4:]))
			if IsEvent(binary.LittleEndian.Uint32(b[off:])) {
				small = append(small, b[off:off+l]...)
				n++
			}
			off += l
		}
		f.Add(small)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := 0
		Read(bytes.NewReader(b), func(e *event.Event) error {
			n++
			return nil
		})
	})
}
