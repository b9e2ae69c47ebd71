package session

import (
	"fmt"
	"io"

	"github.com/sysray/sysray/internal/live"
)

// ReportDrops says on w that a live run lost events in the kernel, if it did.
func ReportDrops(w io.Writer, res live.Result) {
	if res.Drops > 0 {
		fmt.Fprintf(w, "sysray: %d events were lost in the kernel (per CPU: %v); results are incomplete\n", res.Drops, res.PerCPU)
	}
}
