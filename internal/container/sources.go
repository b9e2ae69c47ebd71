package container

// Metadata sources. Dependencies, kept few on purpose:
//
//   - github.com/containerd/containerd/api: containerd's generated protobuf
//     and gRPC stubs only (containers and namespaces services), not the full
//     containerd client, which would pull in most of containerd. It brings
//     google.golang.org/grpc and google.golang.org/protobuf, which any
//     client of containerd's socket needs; its stub packages also import
//     github.com/containerd/ttrpc (and so containerd/log, logrus), which we
//     never call.
//   - k8s.io/cri-api: the Kubernetes CRI's generated stubs, for CRI-O (whose
//     only API is the CRI). Cheap once gRPC is in: the same grpc and
//     protobuf modules, nothing else.
//   - Docker and Podman: the Docker Engine HTTP API over a unix socket, with
//     the standard library only.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	namespacesapi "github.com/containerd/containerd/api/services/namespaces/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Meta is what a container runtime says about a container.
type Meta struct {
	Name          string            // human name: Docker/Podman name, CRI container name, containerd id
	Image         string            // image reference as the container was created from
	Labels        map[string]string // container labels (for containerd, also the image's)
	PodName       string            // Kubernetes pod name (io.kubernetes.pod.name)
	PodNamespace  string            // Kubernetes namespace (io.kubernetes.pod.namespace)
	ContainerName string            // Kubernetes container name (io.kubernetes.container.name)
	Source        string            // the Source that answered
}

// Kubernetes labels set by kubelet (and by tests that imitate it).
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelContainerName = "io.kubernetes.container.name"
)

func (m *Meta) fillKube() {
	if m.PodName == "" {
		m.PodName = m.Labels[LabelPodName]
	}
	if m.PodNamespace == "" {
		m.PodNamespace = m.Labels[LabelPodNamespace]
	}
	if m.ContainerName == "" {
		m.ContainerName = m.Labels[LabelContainerName]
	}
}

// Source fetches metadata from one runtime. Fetch must honour ctx's
// deadline; a Source is called from background goroutines only.
type Source interface {
	Name() string
	Handles(r Ref) bool
	Fetch(ctx context.Context, r Ref) (Meta, error)
}

// NamespaceLister is a Source that can name the containerd namespaces in
// use, so that the Table's Parser recognises "/<namespace>/<id>" paths.
type NamespaceLister interface {
	Namespaces(ctx context.Context) ([]string, error)
}

// ErrNotFound is returned by a Source that is up but has no such container.
var ErrNotFound = errors.New("container not found")

// ErrUnavailable is returned by a Source whose socket does not exist.
var ErrUnavailable = errors.New("runtime socket not present")

// Default sockets.
const (
	ContainerdSocket = "/run/containerd/containerd.sock"
	DockerSocket     = "/var/run/docker.sock"
	PodmanSocket     = "/run/podman/podman.sock"
	CRIOSocket       = "/var/run/crio/crio.sock"
)

// DefaultSources are the runtimes' standard sockets, in the order tried.
func DefaultSources() []Source {
	return []Source{
		&Docker{Socket: DockerSocket},
		&Containerd{Socket: ContainerdSocket},
		&Docker{Socket: PodmanSocket, Podman: true},
		&CRI{Socket: CRIOSocket, Runtimes: []string{RuntimeCRIO, RuntimeCRI}},
	}
}

func socketPresent(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%w: %s", ErrUnavailable, path)
	}
	return nil
}

// grpcConn is a lazily dialled gRPC connection to a unix socket.
type grpcConn struct {
	mu   sync.Mutex
	conn *grpc.ClientConn
}

func (g *grpcConn) get(socket string) (*grpc.ClientConn, error) {
	if err := socketPresent(socket); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conn == nil {
		// NewClient does not connect; RPCs do, and fail fast (not
		// wait-for-ready) when nothing listens.
		c, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		g.conn = c
	}
	return g.conn, nil
}

// check forgets conn when err says it could not reach the runtime, so the
// next call dials anew. A channel that once failed to connect (a runtime
// down, its socket file left behind) fails each call at once, with its old
// error, for as long as gRPC's reconnect backoff runs (up to two minutes):
// a runtime that came back would stay unanswered that long.
func (g *grpcConn) check(conn *grpc.ClientConn, err error) {
	if status.Code(err) != codes.Unavailable {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conn == conn {
		g.conn.Close()
		g.conn = nil
	}
}

func (g *grpcConn) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conn == nil {
		return nil
	}
	err := g.conn.Close()
	g.conn = nil
	return err
}

// Containerd reads container records from containerd's gRPC API. It
// answers for containerd containers (namespace from the Ref, "k8s.io" for
// Kubernetes ones) and, as a fallback, Docker's (namespace "moby").
type Containerd struct {
	Socket string
	conn   grpcConn
}

func (c *Containerd) Name() string { return "containerd" }

func (c *Containerd) Handles(r Ref) bool {
	switch r.Runtime {
	case RuntimeContainerd, RuntimeCRI, RuntimeDocker:
		return true
	}
	return false
}

func (c *Containerd) Fetch(ctx context.Context, r Ref) (Meta, error) {
	conn, err := c.conn.get(c.Socket)
	if err != nil {
		return Meta{}, err
	}
	ns := r.Namespace
	switch {
	case r.Runtime == RuntimeDocker:
		ns = "moby"
	case ns == "":
		ns = "k8s.io"
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "containerd-namespace", ns)
	resp, err := containersapi.NewContainersClient(conn).Get(ctx, &containersapi.GetContainerRequest{ID: r.ID})
	c.conn.check(conn, err)
	if status.Code(err) == codes.NotFound {
		return Meta{}, fmt.Errorf("containerd %s/%s: %w", ns, r.ID, ErrNotFound)
	}
	if err != nil {
		return Meta{}, fmt.Errorf("containerd: %w", err)
	}
	ct := resp.GetContainer()
	m := Meta{Name: ct.GetID(), Image: ct.GetImage(), Labels: maps.Clone(ct.GetLabels()), Source: c.Name()}
	m.fillKube()
	if m.ContainerName != "" {
		m.Name = m.ContainerName
	}
	return m, nil
}

// Namespaces lists containerd's namespaces.
func (c *Containerd) Namespaces(ctx context.Context) ([]string, error) {
	conn, err := c.conn.get(c.Socket)
	if err != nil {
		return nil, err
	}
	resp, err := namespacesapi.NewNamespacesClient(conn).List(ctx, &namespacesapi.ListNamespacesRequest{})
	c.conn.check(conn, err)
	if err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	var out []string
	for _, n := range resp.GetNamespaces() {
		out = append(out, n.GetName())
	}
	return out, nil
}

func (c *Containerd) Close() error { return c.conn.Close() }

// CRI asks a Kubernetes CRI runtime (CRI-O; also containerd's CRI plugin)
// for ContainerStatus.
type CRI struct {
	Socket   string
	Runtimes []string // the Ref runtimes it answers for
	conn     grpcConn
}

func (c *CRI) Name() string { return "cri:" + c.Socket }

func (c *CRI) Handles(r Ref) bool {
	for _, rt := range c.Runtimes {
		if rt == r.Runtime {
			return true
		}
	}
	return false
}

func (c *CRI) Fetch(ctx context.Context, r Ref) (Meta, error) {
	conn, err := c.conn.get(c.Socket)
	if err != nil {
		return Meta{}, err
	}
	resp, err := criapi.NewRuntimeServiceClient(conn).ContainerStatus(ctx, &criapi.ContainerStatusRequest{ContainerId: r.ID})
	c.conn.check(conn, err)
	if status.Code(err) == codes.NotFound {
		return Meta{}, fmt.Errorf("cri %s: %w", r.ID, ErrNotFound)
	}
	if err != nil {
		return Meta{}, fmt.Errorf("cri: %w", err)
	}
	st := resp.GetStatus()
	m := Meta{
		Name:          st.GetMetadata().GetName(),
		Image:         st.GetImage().GetImage(),
		Labels:        maps.Clone(st.GetLabels()),
		ContainerName: st.GetMetadata().GetName(),
		Source:        c.Name(),
	}
	m.fillKube()
	return m, nil
}

func (c *CRI) Close() error { return c.conn.Close() }

// Docker reads GET /containers/<id>/json from the Docker Engine API on a
// unix socket; with Podman set, from Podman's Docker-compatible socket.
type Docker struct {
	Socket string
	Podman bool

	once   sync.Once
	client *http.Client
}

func (d *Docker) Name() string {
	if d.Podman {
		return "podman"
	}
	return "docker"
}

func (d *Docker) Handles(r Ref) bool {
	if d.Podman {
		return r.Runtime == RuntimePodman
	}
	return r.Runtime == RuntimeDocker || r.Runtime == RuntimeCRI
}

func (d *Docker) Fetch(ctx context.Context, r Ref) (Meta, error) {
	if err := socketPresent(d.Socket); err != nil {
		return Meta{}, err
	}
	d.once.Do(func() {
		sock := d.Socket
		d.client = &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var dl net.Dialer
				return dl.DialContext(ctx, "unix", sock)
			},
			MaxIdleConns: 2,
		}}
	})
	// The host part is ignored by the dialer; unversioned paths are
	// accepted by Docker and by Podman's compatibility API.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/containers/"+url.PathEscape(r.ID)+"/json", nil)
	if err != nil {
		return Meta{}, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return Meta{}, fmt.Errorf("%s: %w", d.Name(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return Meta{}, fmt.Errorf("%s: %w", d.Name(), err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return Meta{}, fmt.Errorf("%s %s: %w", d.Name(), r.ShortID(), ErrNotFound)
	case resp.StatusCode != http.StatusOK:
		return Meta{}, fmt.Errorf("%s: %s: %.200s", d.Name(), resp.Status, body)
	}
	return parseDockerInspect(body, d.Name())
}

func parseDockerInspect(body []byte, source string) (Meta, error) {
	var v struct {
		Name   string
		Image  string
		Config struct {
			Image  string
			Labels map[string]string
		}
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return Meta{}, fmt.Errorf("%s: bad inspect JSON: %w", source, err)
	}
	m := Meta{Name: trimSlash(v.Name), Image: v.Config.Image, Labels: v.Config.Labels, Source: source}
	if m.Image == "" {
		m.Image = v.Image
	}
	m.fillKube()
	return m, nil
}

func trimSlash(s string) string {
	if len(s) > 0 && s[0] == '/' {
		return s[1:]
	}
	return s
}

func (d *Docker) Close() error {
	if d.client != nil {
		d.client.CloseIdleConnections()
	}
	return nil
}
