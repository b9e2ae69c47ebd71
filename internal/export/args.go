package export

import (
	"strconv"
	"strings"

	"github.com/sysray/sysray/internal/event"
	"github.com/sysray/sysray/internal/output"
)

// maxSleeps bounds the sleeps shown on one call: the first few say where it
// waited; the rest are in the capture.
const maxSleeps = 4

// syscallArgs are a call's arguments by name (decoded as sysray trace shows
// them, a path as the plain string), its return value and errno, and where
// it slept.
func syscallArgs(args []Arg, arch event.Arch, s *event.Syscall) []Arg {
	spec := event.Lookup(arch, s.Nr)
	if spec == nil {
		for i, v := range s.Args {
			args = append(args, hexArg("arg"+strconv.Itoa(i), v))
		}
	} else {
		for i, as := range spec.Args {
			if i >= len(s.Args) {
				break
			}
			v := s.Args[i]
			switch as.Kind {
			case event.ArgInt, event.ArgFd:
				args = append(args, Arg{Name: as.Name, Kind: ArgInt, Int: int64(int32(v))})
			case event.ArgUint:
				args = append(args, Arg{Name: as.Name, Kind: ArgUint, Uint: v})
			default:
				_, text, _ := event.ArgValue(arch, s, as.Name)
				args = append(args, Arg{Name: as.Name, Kind: ArgString, Str: text})
				if s.Truncated[i] {
					args = append(args, Arg{Name: as.Name + "_truncated", Kind: ArgBool, Bool: true})
				}
			}
		}
	}
	switch {
	case s.Unfinished:
		args = append(args, Arg{Name: "unfinished", Kind: ArgBool, Bool: true})
	case s.Failed():
		args = append(args, Arg{Name: "ret", Kind: ArgInt, Int: s.Ret},
			Arg{Name: "errno", Kind: ArgString, Str: errnoName(int(-s.Ret))})
	default:
		args = append(args, Arg{Name: "ret", Kind: ArgInt, Int: s.Ret})
	}
	if s.Refused {
		args = append(args, Arg{Name: "refused_by_seccomp", Kind: ArgBool, Bool: true})
	}
	if s.Approx {
		args = append(args, Arg{Name: "latency_approximate", Kind: ArgBool, Bool: true})
	}
	if s.Maps != 0 {
		args = append(args, Arg{Name: "maps", Kind: ArgUint, Uint: uint64(s.Maps)})
	}
	var off uint64
	for _, sl := range s.Sleeps {
		off += sl.Duration
	}
	if len(s.Sleeps) > 0 {
		args = append(args, Arg{Name: "off_cpu_ns", Kind: ArgUint, Uint: off})
	}
	for i, sl := range s.Sleeps {
		if i == maxSleeps {
			break
		}
		p := "sleep" + strconv.Itoa(i) + "."
		how := "blocked"
		if sl.Preempted {
			how = "runnable, waiting for a CPU"
		}
		args = append(args, Arg{Name: p + "off_cpu_ns", Kind: ArgUint, Uint: sl.Duration},
			Arg{Name: p + "switches", Kind: ArgUint, Uint: uint64(sl.Count)},
			Arg{Name: p + "state", Kind: ArgString, Str: how},
			Arg{Name: p + "stack", Kind: ArgString, Str: frames(sl.Stack)})
		if sl.WakerTID != 0 || sl.WakerComm != "" {
			args = append(args, Arg{Name: p + "woken_by", Kind: ArgString,
				Str: sl.WakerComm + "(" + strconv.FormatUint(uint64(sl.WakerPID), 10) + ":" + strconv.FormatUint(uint64(sl.WakerTID), 10) + ")"})
		}
		if len(sl.WakerStack) > 0 {
			args = append(args, Arg{Name: p + "waker_stack", Kind: ArgString, Str: frames(sl.WakerStack)})
		}
	}
	if len(s.UserStack) > 0 {
		args = append(args, Arg{Name: "user_stack", Kind: ArgString, Str: frames(s.UserStack)})
	}
	return args
}

func errnoName(n int) string {
	if name := event.ErrnoName(n); name != "" {
		return name
	}
	return "ERRNO_" + strconv.Itoa(n)
}

// frames is a stack innermost first, one frame a line.
func frames(fs []event.Frame) string {
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(output.FrameText(f))
	}
	return b.String()
}
