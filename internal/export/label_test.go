package export

import (
	"testing"

	"github.com/sysray/sysray/internal/filter"
)

func TestContainerLabel(t *testing.T) {
	const id = "4a59687766554433221100ffeeddccbbaa998877669f3e2d1c0b00112233445566"
	for _, tc := range []struct {
		c    filter.Container
		want string
	}{
		{filter.Container{}, ""},
		{filter.Container{Image: "nginx"}, ""}, // no container to name
		{filter.Container{ID: id}, "container 4a5968776655"},
		{filter.Container{ID: id, Name: "web"}, "container web"},
		{filter.Container{ID: id, Image: "nginx:1.27"}, "container 4a5968776655 (nginx:1.27)"},
		{filter.Container{ID: id, Name: "web", Image: "nginx:1.27", PodName: "web-0", PodNamespace: "shop"},
			"container web (nginx:1.27, pod shop/web-0)"},
		{filter.Container{Name: "web", PodName: "web-0", PodNamespace: "shop"}, "container web (pod shop/web-0)"},
	} {
		if got := containerLabel(tc.c); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
}
