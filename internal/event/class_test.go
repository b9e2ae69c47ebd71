package event

import (
	"slices"
	"testing"
)

func TestClasses(t *testing.T) {
	for _, n := range Names(Waits) {
		if !Is(n, MayWait) {
			t.Errorf("%s waits by design but is not MayWait", n)
		}
	}
	for _, n := range Names(SyncsDevice) {
		if !Is(n, AsksIO) {
			t.Errorf("%s syncs to the device but is not AsksIO", n)
		}
	}
	for _, n := range Names(Polls) {
		if !Is(n, Waits) {
			t.Errorf("%s polls but does not wait by design", n)
		}
	}
	if !Is("read", MayWait) || Is("read", Waits) || Is("openat", MayWait) || !Is("pipe2", MakesFD|NeverWaits) {
		t.Error("read, openat or pipe2 misclassed")
	}
	if n := Names(Waits); !slices.Contains(n, "epoll_wait") || slices.Contains(n, "read") {
		t.Errorf("Names(Waits) = %v", n)
	}
}
