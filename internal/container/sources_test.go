package container

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	namespacesapi "github.com/containerd/containerd/api/services/namespaces/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// shortSocket returns a unix socket path short enough for sun_path.
func shortSocket(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ct")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, name)
}

func listen(t *testing.T, sock string) net.Listener {
	t.Helper()
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A Docker inspect answer, trimmed from a real one.
const dockerInspect = `{
 "Id": "` + id64 + `",
 "Name": "/web",
 "Image": "sha256:1111",
 "Config": {
  "Image": "nginx:1.25",
  "Labels": {"io.kubernetes.pod.name": "web-0", "io.kubernetes.pod.namespace": "shop",
             "io.kubernetes.container.name": "nginx", "maintainer": "x"}
 }
}`

func TestDockerSource(t *testing.T) {
	sock := shortSocket(t, "docker.sock")
	l := listen(t, sock)
	var paths []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		switch r.URL.Path {
		case "/containers/" + id64 + "/json":
			w.Write([]byte(dockerInspect))
		case "/containers/slow/json":
			<-r.Context().Done()
		default:
			http.Error(w, `{"message":"No such container"}`, http.StatusNotFound)
		}
	})}
	go srv.Serve(l)
	defer srv.Close()

	d := &Docker{Socket: sock}
	defer d.Close()
	ctx := context.Background()
	m, err := d.Fetch(ctx, Ref{Runtime: RuntimeDocker, ID: id64})
	if err != nil {
		t.Fatal(err)
	}
	want := Meta{Name: "web", Image: "nginx:1.25", PodName: "web-0", PodNamespace: "shop", ContainerName: "nginx", Source: "docker"}
	if m.Name != want.Name || m.Image != want.Image || m.PodName != want.PodName || m.PodNamespace != want.PodNamespace ||
		m.ContainerName != want.ContainerName || m.Source != want.Source || m.Labels["maintainer"] != "x" {
		t.Errorf("got %+v", m)
	}
	if _, err := d.Fetch(ctx, Ref{Runtime: RuntimeDocker, ID: "nope"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing container: %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := d.Fetch(tctx, Ref{Runtime: RuntimeDocker, ID: "slow"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow daemon: %v", err)
	}

	p := &Docker{Socket: sock, Podman: true}
	if !p.Handles(Ref{Runtime: RuntimePodman}) || p.Handles(Ref{Runtime: RuntimeDocker}) || d.Handles(Ref{Runtime: RuntimePodman}) {
		t.Error("Handles")
	}
	if m, err := p.Fetch(ctx, Ref{Runtime: RuntimePodman, ID: id64}); err != nil || m.Source != "podman" {
		t.Errorf("podman: %+v %v", m, err)
	}
}

func TestParseDockerInspectImageFallback(t *testing.T) {
	m, err := parseDockerInspect([]byte(`{"Name":"/a","Image":"sha256:22","Config":{}}`), "docker")
	if err != nil || m.Name != "a" || m.Image != "sha256:22" {
		t.Errorf("%+v %v", m, err)
	}
	if _, err := parseDockerInspect([]byte(`{`), "docker"); err == nil {
		t.Error("bad JSON accepted")
	}
}

type fakeContainerd struct {
	containersapi.UnimplementedContainersServer
	containers map[string]*containersapi.Container // "ns/id"
}

type fakeNamespaces struct {
	namespacesapi.UnimplementedNamespacesServer
}

func (f *fakeContainerd) Get(ctx context.Context, req *containersapi.GetContainerRequest) (*containersapi.GetContainerResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	ns := strings.Join(md.Get("containerd-namespace"), ",")
	c, ok := f.containers[ns+"/"+req.ID]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "container %q in namespace %q: not found", req.ID, ns)
	}
	return &containersapi.GetContainerResponse{Container: c}, nil
}

func (fakeNamespaces) List(context.Context, *namespacesapi.ListNamespacesRequest) (*namespacesapi.ListNamespacesResponse, error) {
	return &namespacesapi.ListNamespacesResponse{Namespaces: []*namespacesapi.Namespace{{Name: "default"}, {Name: "buildkit"}}}, nil
}

func TestContainerdSource(t *testing.T) {
	sock := shortSocket(t, "containerd.sock")
	l := listen(t, sock)
	gs := grpc.NewServer()
	fake := &fakeContainerd{containers: map[string]*containersapi.Container{
		"default/web": {ID: "web", Image: "docker.io/sysray/busybox:test", Labels: map[string]string{
			LabelPodName: "web-0", LabelPodNamespace: "shop", LabelContainerName: "app"}},
		"k8s.io/" + id64: {ID: id64, Image: "registry.k8s.io/pause:3.9"},
		"moby/" + id64b:  {ID: id64b, Image: "sha256:33"},
	}}
	containersapi.RegisterContainersServer(gs, fake)
	namespacesapi.RegisterNamespacesServer(gs, fakeNamespaces{})
	go gs.Serve(l)
	defer gs.Stop()

	c := &Containerd{Socket: sock}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	m, err := c.Fetch(ctx, Ref{Runtime: RuntimeContainerd, Namespace: "default", ID: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "app" || m.Image != "docker.io/sysray/busybox:test" || m.PodName != "web-0" || m.PodNamespace != "shop" || m.ContainerName != "app" {
		t.Errorf("default/web: %+v", m)
	}
	// Kubernetes containers (namespace unknown from a cgroupfs path) are in k8s.io.
	if m, err := c.Fetch(ctx, Ref{Runtime: RuntimeCRI, ID: id64}); err != nil || m.Image != "registry.k8s.io/pause:3.9" || m.Name != id64 {
		t.Errorf("cri: %+v %v", m, err)
	}
	// Docker's containers are in moby.
	if m, err := c.Fetch(ctx, Ref{Runtime: RuntimeDocker, ID: id64b}); err != nil || m.Image != "sha256:33" {
		t.Errorf("moby: %+v %v", m, err)
	}
	if _, err := c.Fetch(ctx, Ref{Runtime: RuntimeContainerd, Namespace: "default", ID: "gone"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
	ns, err := c.Namespaces(ctx)
	if err != nil || strings.Join(ns, ",") != "default,buildkit" {
		t.Errorf("namespaces: %q %v", ns, err)
	}

	// A socket file with nothing behind it (containerd died) fails fast.
	gs.Stop()
	stale, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	start := time.Now()
	_, err = (&Containerd{Socket: sock}).Fetch(ctx, Ref{Runtime: RuntimeContainerd, ID: "web"})
	if err == nil || errors.Is(err, ErrUnavailable) || time.Since(start) > 2*time.Second {
		t.Errorf("dead containerd: %v after %v", err, time.Since(start))
	}
}

// A containerd that comes back behind the socket file its dead self left
// is answered at once, not after gRPC's reconnect backoff: the agent asks
// for a new container's name the moment it starts, and a failure is kept
// for RetryAfter.
func TestContainerdSourceComesBack(t *testing.T) {
	sock := shortSocket(t, "containerd.sock")
	stale, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	c := &Containerd{Socket: sock}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	web := Ref{Runtime: RuntimeContainerd, Namespace: "default", ID: "web"}
	if _, err := c.Namespaces(ctx); err == nil {
		t.Fatal("namespaces of a dead containerd: no error")
	}
	if _, err := c.Fetch(ctx, web); err == nil {
		t.Fatal("fetch from a dead containerd: no error")
	}

	// containerd starts again: it replaces the socket file.
	os.Remove(sock)
	l := listen(t, sock)
	gs := grpc.NewServer()
	containersapi.RegisterContainersServer(gs, &fakeContainerd{containers: map[string]*containersapi.Container{
		"default/web": {ID: "web", Image: "docker.io/sysray/busybox:test"}}})
	namespacesapi.RegisterNamespacesServer(gs, fakeNamespaces{})
	go gs.Serve(l)
	defer gs.Stop()
	if m, err := c.Fetch(ctx, web); err != nil || m.Image != "docker.io/sysray/busybox:test" {
		t.Errorf("fetch once containerd is back: %+v %v", m, err)
	}
	if ns, err := c.Namespaces(ctx); err != nil || len(ns) != 2 {
		t.Errorf("namespaces once containerd is back: %q %v", ns, err)
	}
}

type fakeCRI struct {
	criapi.UnimplementedRuntimeServiceServer
}

func (fakeCRI) ContainerStatus(_ context.Context, req *criapi.ContainerStatusRequest) (*criapi.ContainerStatusResponse, error) {
	if req.ContainerId != id64 {
		return nil, status.Error(codes.NotFound, "no such container")
	}
	return &criapi.ContainerStatusResponse{Status: &criapi.ContainerStatus{
		Id:       id64,
		Metadata: &criapi.ContainerMetadata{Name: "nginx"},
		Image:    &criapi.ImageSpec{Image: "docker.io/library/nginx:1.25"},
		Labels:   map[string]string{LabelPodName: "web-0", LabelPodNamespace: "shop", LabelContainerName: "nginx"},
	}}, nil
}

func TestCRISource(t *testing.T) {
	sock := shortSocket(t, "crio.sock")
	l := listen(t, sock)
	gs := grpc.NewServer()
	criapi.RegisterRuntimeServiceServer(gs, fakeCRI{})
	go gs.Serve(l)
	defer gs.Stop()

	c := &CRI{Socket: sock, Runtimes: []string{RuntimeCRIO}}
	defer c.Close()
	if !c.Handles(Ref{Runtime: RuntimeCRIO}) || c.Handles(Ref{Runtime: RuntimeDocker}) {
		t.Error("Handles")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := c.Fetch(ctx, Ref{Runtime: RuntimeCRIO, ID: id64})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "nginx" || m.Image != "docker.io/library/nginx:1.25" || m.PodName != "web-0" || m.PodNamespace != "shop" || m.ContainerName != "nginx" {
		t.Errorf("%+v", m)
	}
	if _, err := c.Fetch(ctx, Ref{Runtime: RuntimeCRIO, ID: id64b}); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
}
