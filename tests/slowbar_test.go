package tests

import (
	"encoding/json"
	"strings"
	"testing"
)

// fifoOpens opens a FIFO five times, each open asleep about 30 ms until
// its writer comes.
const fifoOpens = `d=$(mktemp -d); mkfifo $d/f
for i in 1 2 3 4 5; do
	( sleep 0.03; echo x > $d/f ) &
	cat $d/f > /dev/null
	wait
done
rm -r $d`

// --slow is the doctor's slow bar, not only the probe's: under --slow 50ms
// the probe carries no sleeps for 30 ms opens, and the doctor must not
// then take them for calls that ran in the kernel.
func TestDoctorSlowFlagIsTheBar(t *testing.T) {
	requireBPF(t)
	for _, slow := range []string{"50ms", "10ms"} {
		r := runOut(t, "doctor", "--json", "--slow", slow, "--", "sh", "-c", fifoOpens)
		if r.code != 0 {
			t.Fatalf("--slow %s: exit %d: %s", slow, r.code, r.stderr)
		}
		var rep struct {
			Findings []struct{ ID, Title string }
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("--slow %s: %v\n%s", slow, err, r.stdout)
		}
		for _, f := range rep.Findings {
			if f.ID == "slow-syscall" && strings.Contains(f.Title, "openat") {
				t.Errorf("--slow %s: %s", slow, f.Title)
			}
		}
	}
}
