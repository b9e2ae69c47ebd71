package event

import "testing"

func TestErrnoName(t *testing.T) {
	tests := []struct {
		n          int
		name, desc string
	}{
		{1, "EPERM", "Operation not permitted"},
		{2, "ENOENT", "No such file or directory"},
		{4, "EINTR", "Interrupted system call"},
		{5, "EIO", "Input/output error"},
		{11, "EAGAIN", "Resource temporarily unavailable"},
		{12, "ENOMEM", "Cannot allocate memory"},
		{13, "EACCES", "Permission denied"},
		{22, "EINVAL", "Invalid argument"},
		{35, "EDEADLK", "Resource deadlock avoided"},
		{38, "ENOSYS", "Function not implemented"},
		{95, "EOPNOTSUPP", "Operation not supported"},
		{110, "ETIMEDOUT", "Connection timed out"},
		{111, "ECONNREFUSED", "Connection refused"},
		{115, "EINPROGRESS", "Operation now in progress"},
		{133, "EHWPOISON", "Memory page has hardware error"},
		{512, "ERESTARTSYS", "To be restarted if SA_RESTART is set"},
		{513, "ERESTARTNOINTR", "To be restarted"},
		{514, "ERESTARTNOHAND", "To be restarted if no handler"},
		{516, "ERESTART_RESTARTBLOCK", "Interrupted by signal"},
		{529, "EIOCBQUEUED", "iocb queued, will get completion event"},
		{41, "", "Unknown error 41"}, // a hole in the numbering
		{0, "", "Unknown error 0"},
		{-2, "", "Unknown error -2"},
		{520, "", "Unknown error 520"},
		{4095, "", "Unknown error 4095"},
	}
	for _, tt := range tests {
		if got := ErrnoName(tt.n); got != tt.name {
			t.Errorf("ErrnoName(%d) = %q, want %q", tt.n, got, tt.name)
		}
		if got := ErrnoDesc(tt.n); got != tt.desc {
			t.Errorf("ErrnoDesc(%d) = %q, want %q", tt.n, got, tt.desc)
		}
	}
}

func TestErrnoByName(t *testing.T) {
	for n := 1; n < 1000; n++ {
		name := ErrnoName(n)
		if name == "" {
			continue
		}
		if got, ok := ErrnoByName(name); !ok || got != n {
			t.Errorf("ErrnoByName(%q) = %d, %v; want %d", name, got, ok, n)
		}
		if ErrnoDesc(n) == "Unknown error "+name {
			t.Errorf("%s has no description", name)
		}
	}
	tests := []struct {
		s    string
		want int
		ok   bool
	}{
		{"EWOULDBLOCK", 11, true},
		{"EDEADLOCK", 35, true},
		{"ENOTSUP", 95, true},
		{"enoent", 2, true},
		{"2", 2, true},
		{"0", 0, false},
		{"ENOTANERROR", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := ErrnoByName(tt.s)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ErrnoByName(%q) = %d, %v; want %d, %v", tt.s, got, ok, tt.want, tt.ok)
		}
	}
}
