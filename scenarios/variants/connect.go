package variants

import (
	"time"

	"github.com/sysray/sysray/internal/doctor"
)

var connectVariants = []Variant{
	// connect-retransmit: connects that wait out the SYN retransmission
	// timer. synloss makes a namespace pair of its own (10.221.0.1 and
	// .2 on a veth) and drops SYNs there with an nftables rule, or fills
	// a listener's accept queue. These change what the mechanism does
	// not care about: the call that waits (connect itself, or poll after
	// EINPROGRESS), how many SYNs are lost, why they are, and how sysray
	// is pointed at it.
	{Name: "connect-retransmit/blocking", Differs: "4 blocking connects, each losing its first SYN to a drop rule in the server's namespace: ≈1 s each",
		Mode: Cmd, Argv: []string{"synloss", "-n", "4"},
		Expect: connWarns("10.221.0.2:8080", "4 at ≈1 s", "dropped on the way")},
	{Name: "connect-retransmit/nonblocking-poll", Differs: "3 non-blocking connects (EINPROGRESS), each losing 2 SYNs; poll waits ≈2 s for the socket to be writable",
		Mode: Cmd, Argv: []string{"synloss", "-n", "3", "-k", "2", "-P"},
		Expect: connWarns("10.221.0.2:8080", "3 at ≈2 s", "poll", "dropped on the way")},
	{Name: "connect-retransmit/accept-queue-full", Differs: "no drop rule: a listener with a backlog of 1 that never accepts; 2 connects fill its queue, 3 more fail with ETIMEDOUT after one retry (TCP_SYNCNT 1)",
		Mode: Cmd, Argv: []string{"synloss", "-n", "5", "-o"},
		Expect: connWarns("10.221.0.2:8080", "ETIMEDOUT", "accept queue was full")},
	{Name: "connect-retransmit/pid", Differs: "the client connecting before sysray starts, one SYN lost a connect; -p for 4 s",
		Mode: PID, Argv: []string{"synloss", "-n", "0", "-d", "10"},
		Lead: 1500 * time.Millisecond, For: 4 * time.Second, Expect: connWarns("10.221.0.2:8080", "at ≈1 s")},
	{Name: "connect-retransmit/host", Differs: "non-blocking connects losing one SYN, begun before sysray starts; the whole host for 4 s",
		Mode: Host, Argv: []string{"synloss", "-n", "0", "-d", "10", "-P"},
		Lead: 1500 * time.Millisecond, For: 4 * time.Second, Expect: connWarns("10.221.0.2:8080", "at ≈1 s", "poll")},
	{Name: "connect-retransmit/refused", Differs: "benign: connects to a closed port of the server, refused at once (RST, ECONNREFUSED)",
		Mode: Cmd, Argv: []string{"synloss", "-n", "50", "-c"}, Expect: connSilent()},
	{Name: "connect-retransmit/fast", Differs: "benign: no SYN lost, 50 non-blocking connects that complete at once",
		Mode: Cmd, Argv: []string{"synloss", "-n", "50", "-k", "0", "-P"}, Expect: connSilent()},
}

func connWarns(words ...string) Expect {
	return Expect{IDs: []doctor.ID{doctor.ConnectRetransmit}, Severity: doctor.Warning, Words: words}
}

func connSilent() Expect {
	return Expect{IDs: []doctor.ID{doctor.ConnectRetransmit}, Silent: true}
}
