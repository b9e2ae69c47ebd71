package event

import (
	"reflect"
	"testing"
)

func TestSpecTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range specTable {
		if seen[s.Name] {
			t.Errorf("%s described twice", s.Name)
		}
		seen[s.Name] = true
		_, amd := SyscallByName(ArchAMD64, s.Name)
		_, arm := SyscallByName(ArchARM64, s.Name)
		if !amd && !arm {
			t.Errorf("%s is in no syscall table", s.Name)
		}
		checkSpec(t, &s)
	}
	for _, list := range archSpecs {
		for _, s := range list {
			checkSpec(t, &s)
		}
	}
}

func checkSpec(t *testing.T, s *Spec) {
	t.Helper()
	if len(s.Args) > 6 {
		t.Errorf("%s has %d args", s.Name, len(s.Args))
	}
	switch s.RetKind {
	case ArgInt, ArgFd, ArgHex, ArgPtr:
	default:
		t.Errorf("%s: RetKind %d", s.Name, s.RetKind)
	}
	names := map[string]bool{}
	for i, a := range s.Args {
		if a.Name == "" || names[a.Name] {
			t.Errorf("%s: arg %d has an empty or repeated name %q", s.Name, i, a.Name)
		}
		names[a.Name] = true
		isAddr := a.Kind == ArgSockaddr || a.Kind == ArgSockaddrOut || a.Kind == ArgDNSQuery
		switch {
		case isAddr && (a.LenArg < 0 || int(a.LenArg) >= len(s.Args) || int(a.LenArg) == i):
			t.Errorf("%s: %s has LenArg %d", s.Name, a.Name, a.LenArg)
		case !isAddr && a.LenArg != -1:
			t.Errorf("%s: %s has LenArg %d, want -1", s.Name, a.Name, a.LenArg)
		}
	}
}

func TestLookupCoversEverySyscall(t *testing.T) {
	for _, a := range []Arch{ArchAMD64, ArchARM64} {
		for nr, name := range syscallTable(a) {
			s := Lookup(a, uint32(nr))
			switch {
			case name == "" && s != nil:
				t.Errorf("Lookup(%v, %d) = %s for a hole", a, nr, s.Name)
			case name != "" && (s == nil || s.Name != name):
				t.Errorf("Lookup(%v, %d) = %v, want %s", a, nr, s, name)
			}
		}
		if Lookup(a, MaxSyscall(a)+1) != nil || Lookup(a, 1<<31) != nil {
			t.Errorf("%v: Lookup past the table is not nil", a)
		}
	}
	if Lookup(Arch(9), 0) != nil {
		t.Error("Lookup on an unknown arch is not nil")
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		arch  Arch
		nr    uint32
		name  string
		ret   ArgKind
		args  []string
		kinds []ArgKind
	}{
		{ArchAMD64, 257, "openat", ArgFd, []string{"dirfd", "pathname", "flags", "mode"}, []ArgKind{ArgDirFd, ArgPath, ArgOpenFlags, ArgMode}},
		{ArchARM64, 56, "openat", ArgFd, []string{"dirfd", "pathname", "flags", "mode"}, []ArgKind{ArgDirFd, ArgPath, ArgOpenFlags, ArgMode}},
		{ArchAMD64, 0, "read", ArgInt, []string{"fd", "buf", "count"}, []ArgKind{ArgFd, ArgDNSAnswer, ArgUint}},
		{ArchAMD64, 9, "mmap", ArgHex, []string{"addr", "length", "prot", "flags", "fd", "offset"}, []ArgKind{ArgPtr, ArgUint, ArgProt, ArgMapFlags, ArgFd, ArgHex}},
		{ArchAMD64, 221, "fadvise64", ArgInt, []string{"fd", "offset", "len", "advice"}, []ArgKind{ArgFd, argLong, argLong, ArgFadvise}},
		{ArchAMD64, 42, "connect", ArgInt, []string{"sockfd", "addr", "addrlen"}, []ArgKind{ArgFd, ArgSockaddr, ArgUint}},
		{ArchAMD64, 288, "accept4", ArgFd, []string{"sockfd", "addr", "addrlen", "flags"}, []ArgKind{ArgFd, ArgSockaddrOut, ArgPtr, ArgAccept4Flags}},
		{ArchAMD64, 56, "clone", ArgInt, []string{"flags", "stack", "parent_tid", "child_tid", "tls"}, []ArgKind{ArgCloneFlags, ArgPtr, ArgPtr, ArgPtr, ArgHex}},
		{ArchARM64, 220, "clone", ArgInt, []string{"flags", "stack", "parent_tid", "tls", "child_tid"}, []ArgKind{ArgCloneFlags, ArgPtr, ArgPtr, ArgHex, ArgPtr}},
		{ArchAMD64, 39, "getpid", ArgInt, nil, nil},
		{ArchAMD64, 183, "afs_syscall", ArgInt, []string{"arg0", "arg1", "arg2", "arg3", "arg4", "arg5"}, []ArgKind{ArgHex, ArgHex, ArgHex, ArgHex, ArgHex, ArgHex}},
	}
	for _, tt := range tests {
		s := Lookup(tt.arch, tt.nr)
		if s == nil {
			t.Errorf("Lookup(%v, %d) = nil", tt.arch, tt.nr)
			continue
		}
		var names []string
		var kinds []ArgKind
		for _, a := range s.Args {
			names = append(names, a.Name)
			kinds = append(kinds, a.Kind)
		}
		if s.Name != tt.name || s.RetKind != tt.ret || !reflect.DeepEqual(names, tt.args) || !reflect.DeepEqual(kinds, tt.kinds) {
			t.Errorf("Lookup(%v, %d) = %s %v %v -> %d, want %s %v %v -> %d",
				tt.arch, tt.nr, s.Name, names, kinds, s.RetKind, tt.name, tt.args, tt.kinds, tt.ret)
		}
	}
}

func TestCaptures(t *testing.T) {
	tests := []struct {
		arch Arch
		name string
		want []Capture
	}{
		{ArchAMD64, "openat", []Capture{{Arg: 1, Kind: CapPath, LenArg: -1}}},
		{ArchAMD64, "open", []Capture{{Arg: 0, Kind: CapPath, LenArg: -1}}},
		{ArchAMD64, "execve", []Capture{{Arg: 0, Kind: CapPath, LenArg: -1}}},
		{ArchAMD64, "renameat", []Capture{{Arg: 1, Kind: CapPath, LenArg: -1}, {Arg: 3, Kind: CapPath, LenArg: -1}}},
		{ArchAMD64, "symlinkat", []Capture{{Arg: 0, Kind: CapPath, LenArg: -1}, {Arg: 2, Kind: CapPath, LenArg: -1}}},
		{ArchAMD64, "memfd_create", []Capture{{Arg: 0, Kind: CapPath, LenArg: -1}}},
		{ArchAMD64, "connect", []Capture{{Arg: 1, Kind: CapSockaddr, LenArg: 2}}},
		{ArchAMD64, "bind", []Capture{{Arg: 1, Kind: CapSockaddr, LenArg: 2}}},
		{ArchAMD64, "sendto", []Capture{{Arg: 1, Kind: CapDNS, LenArg: 2}, {Arg: 4, Kind: CapSockaddr, LenArg: 5}}},
		{ArchAMD64, "sendmmsg", []Capture{{Arg: 1, Kind: CapDNSMmsg, LenArg: -1}, {Arg: 2, Kind: CapDNSMmsg, LenArg: -1}}},
		{ArchAMD64, "accept", []Capture{{Arg: 1, Kind: CapSockaddrOut, LenArg: 2}}},
		{ArchAMD64, "accept4", []Capture{{Arg: 1, Kind: CapSockaddrOut, LenArg: 2}}},
		{ArchAMD64, "getsockname", []Capture{{Arg: 1, Kind: CapSockaddrOut, LenArg: 2}}},
		{ArchAMD64, "getpeername", []Capture{{Arg: 1, Kind: CapSockaddrOut, LenArg: 2}}},
		{ArchAMD64, "recvfrom", []Capture{{Arg: 1, Kind: CapDNSAns, LenArg: -1}, {Arg: 4, Kind: CapSockaddrOut, LenArg: 5}}},
		{ArchARM64, "connect", []Capture{{Arg: 1, Kind: CapSockaddr, LenArg: 2}}},
		{ArchARM64, "unlinkat", []Capture{{Arg: 1, Kind: CapPath, LenArg: -1}}},
		{ArchAMD64, "read", []Capture{{Arg: 1, Kind: CapDNSAns, LenArg: -1}}},
		{ArchAMD64, "pread64", nil},
		{ArchAMD64, "getpid", nil},
	}
	for _, tt := range tests {
		nr, ok := SyscallByName(tt.arch, tt.name)
		if !ok {
			t.Fatalf("no %s on %v", tt.name, tt.arch)
		}
		if got := Captures(tt.arch, nr); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Captures(%v, %s) = %+v, want %+v", tt.arch, tt.name, got, tt.want)
		}
	}
	if Captures(ArchAMD64, 400) != nil {
		t.Error("Captures of an unknown syscall is not nil")
	}
}
