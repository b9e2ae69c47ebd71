// Package units formats quantities for people.
package units

import "fmt"

// Duration formats nanoseconds with a unit that keeps three significant
// digits: "830ns", "12.5µs", "1.20ms", "2.35s".
func Duration(ns uint64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.2fs", float64(ns)/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.2fms", float64(ns)/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1fµs", float64(ns)/1e3)
	}
	return fmt.Sprintf("%dns", ns)
}
