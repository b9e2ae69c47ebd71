package tests

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/sysray/sysray/internal/capture"
	"github.com/sysray/sysray/internal/session"
)

// netns is a network namespace the test made, joined to the test's by a
// veth pair: the agent listens inside on every address, and the test
// reaches it over a network interface, as a pod on the node's network would.
type netns struct {
	name       string
	host, peer string // the veth addresses: the test's side and the namespace's
}

var netnsSeq atomic.Int32

func newNetns(t *testing.T) netns {
	t.Helper()
	// One of its own per call: tests that use one run alongside each other.
	seq := netnsSeq.Add(1)
	n := (os.Getpid()+int(seq))%200 + 20
	ns := netns{name: fmt.Sprintf("sysray-t%d-%d", os.Getpid(), seq), host: fmt.Sprintf("10.213.%d.1", n), peer: fmt.Sprintf("10.213.%d.2", n)}
	hv, pv := fmt.Sprintf("srh%d-%d", os.Getpid(), seq), fmt.Sprintf("srp%d-%d", os.Getpid(), seq)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", ns.name)
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", hv).Run()
		exec.Command("ip", "netns", "del", ns.name).Run()
	})
	run("link", "add", hv, "type", "veth", "peer", "name", pv)
	run("link", "set", pv, "netns", ns.name)
	run("addr", "add", ns.host+"/30", "dev", hv)
	run("link", "set", hv, "up")
	run("-n", ns.name, "addr", "add", ns.peer+"/30", "dev", pv)
	run("-n", ns.name, "link", "set", pv, "up")
	run("-n", ns.name, "link", "set", "lo", "up")
	return ns
}

// agentIn runs `sysray agent args...` in ns, listening on every address
// of ns at port 9437 (nothing else listens in a namespace this new).
func (ns netns) agentIn(t *testing.T, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.name, sysray, "agent", "--listen", "0.0.0.0:9437",
		"--interval", "500ms", "--syscalls", "always"}, args...)...)
}

// curl runs curl and returns the status code and body.
func curl(t *testing.T, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command("curl", append([]string{"-sS", "--max-time", "10", "-w", "\n%{http_code}"}, args...)...).CombinedOutput()
	s := strings.TrimRight(string(out), "\n")
	i := strings.LastIndexByte(s, '\n')
	var code int
	fmt.Sscan(s[i+1:], &code)
	if err != nil && code == 0 {
		return 0, string(out)
	}
	return code, s[:max(i, 0)]
}

func requireCurl(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("SYSRAY_REQUIRE_BPF") == "1" {
			t.Fatal("curl is not installed (apt-get install curl)")
		}
		t.Skip("curl is not installed")
	}
}

// Served beyond loopback without a web config, the agent gives metrics and
// health to the network and nothing else: its findings, captures and
// snapshots answer 403 there (so no capture is written), and are served on
// its unix socket, mode 0600. A planted password reaches neither the
// findings nor the capture, and the capture says it was redacted.
func TestAgentAPINotOnNetwork(t *testing.T) {
	alongside(t)
	requireBPF(t)
	requireCurl(t)
	ns := newNetns(t)
	capDir, sockDir := t.TempDir(), t.TempDir()
	sock := filepath.Join(sockDir, "api.sock")
	a := launchAgent(t, ns.agentIn(t, "--capture-dir", capDir, "--api-listen", "unix:"+sock))
	a.base = "http://" + ns.peer + ":9437"
	a.waitHealthy(t, http.Get)

	if code, body := curl(t, a.base+"/metrics"); code != 200 || !strings.Contains(body, "sysray_agent_last_read_timestamp_seconds") {
		t.Errorf("GET /metrics over the network: %d, want 200 with sysray's series", code)
	}
	for _, req := range [][]string{
		{a.base + "/api/findings"}, {a.base + "/api/captures"}, {a.base + "/api/captures/x.sysray"},
		{"-XPOST", a.base + "/api/snapshot"},
	} {
		code, body := curl(t, req...)
		if code != 403 || !strings.Contains(body, "unix:"+sock) {
			t.Errorf("curl %s over the network: %d %s, want 403 naming the socket", strings.Join(req, " "), code, body)
		}
	}
	if ents, _ := os.ReadDir(capDir); len(ents) != 0 {
		t.Errorf("a refused snapshot wrote %d captures", len(ents))
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the API socket: %v %v, want mode 0600", fi, err)
	}

	// A process with a password on its command line, then a snapshot
	// through the socket.
	planted := fmt.Sprintf("PLANTED%dsecret", os.Getpid())
	if out, err := exec.Command("/bin/sh", "-c", "/bin/sleep 0.5 # --password="+planted, "sh", "--db-token", planted).CombinedOutput(); err != nil {
		t.Fatalf("sh: %v %s", err, out)
	}
	time.Sleep(time.Second)
	code, body := curl(t, "--unix-socket", sock, "-XPOST", "http://localhost/api/snapshot")
	if code != 201 {
		t.Fatalf("POST /api/snapshot on the socket: %d %s", code, body)
	}
	var e struct{ Name string }
	json.Unmarshal([]byte(body), &e)
	if code, body := curl(t, "--unix-socket", sock, "http://localhost/api/findings"); code != 200 || strings.Contains(body, planted) {
		t.Errorf("GET /api/findings on the socket: %d, planted secret shown: %v", code, strings.Contains(body, planted))
	}
	capFile := filepath.Join(capDir, e.Name)
	out, err := exec.Command(sysray, "read", "--keep-secrets", "--json", capFile).Output()
	if err != nil {
		t.Fatalf("read %s: %v", capFile, err)
	}
	if strings.Contains(string(out), planted) {
		t.Errorf("the agent's capture holds the planted secret")
	}
	if !strings.Contains(string(out), "--password=<redacted>") {
		t.Errorf("the agent's capture does not show the redacted exec of sleep")
	}
	r, err := capture.Open(capFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Header().Meta[session.MetaRedacted]; got != "argv" {
		t.Errorf("the capture's header says redacted=%q, want argv", got)
	}
	r.Close()
	if code, _ := a.stop(t); code != 0 {
		t.Errorf("agent exit status %d", code)
	}
}

// An API address beyond loopback without TLS and authentication is
// refused at start, before any program loads.
func TestAgentRefusesOpenAPI(t *testing.T) {
	requireBPF(t)
	ns := newNetns(t)
	for _, args := range [][]string{
		{"--api-listen", "0.0.0.0:9438"},
		{"--api-listen", "0.0.0.0:9437"},
	} {
		out, err := ns.agentIn(t, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--api-listen") || !strings.Contains(string(out), "web.config.file") {
			t.Errorf("agent %s: %v\n%s; want an error naming --api-listen and --web.config.file", strings.Join(args, " "), err, out)
		}
	}
	// A web config with TLS but no authentication does not open it either.
	dir := t.TempDir()
	newCA(t, dir, ns.peer)
	cfg := filepath.Join(dir, "web.yml")
	os.WriteFile(cfg, []byte("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"), 0o600)
	out, err := ns.agentIn(t, "--web.config.file", cfg, "--api-listen", "0.0.0.0:9438").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--api-listen") {
		t.Errorf("TLS without authentication: %v\n%s; want the API address refused", err, out)
	}
}

// With a web config of TLS and basic auth, the agent serves everything to
// the network, but only over TLS and to who gives the password: curl and a
// real Prometheus (its tls_config and basic_auth) get in, nobody else.
func TestAgentWebConfig(t *testing.T) {
	alongside(t)
	requireBPF(t)
	requireCurl(t)
	requirePrometheus(t)
	ns := newNetns(t)
	dir := t.TempDir()
	caFile := newCA(t, dir, ns.peer)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "web.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`tls_server_config:
  cert_file: server.crt
  key_file: server.key
basic_auth_users:
  prom: %s
`, hash)), 0o600)
	a := launchAgent(t, ns.agentIn(t, "--capture-dir", t.TempDir(), "--web.config.file", cfg))
	a.base = "https://" + ns.peer + ":9437"
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	a.waitHealthy(t, func(url string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(context.Background(), "GET", url, nil)
		req.SetBasicAuth("prom", "s3cret-pw")
		return client.Do(req)
	})

	good := []string{"--cacert", caFile, "-u", "prom:s3cret-pw"}
	for _, c := range []struct {
		args []string
		want int
	}{
		{append(good, a.base+"/api/findings"), 200},
		{append(good, a.base+"/metrics"), 200},
		{append(good, "-XPOST", a.base+"/api/snapshot"), 201},
		{[]string{"--cacert", caFile, a.base + "/api/findings"}, 401},
		{[]string{"--cacert", caFile, a.base + "/metrics"}, 401},
		{[]string{"--cacert", caFile, "-u", "prom:wrong", a.base + "/api/findings"}, 401},
		{[]string{"--cacert", caFile, "-XPOST", a.base + "/api/snapshot"}, 401},
		// Plain HTTP to the TLS port: Go's server answers 400.
		{[]string{"-u", "prom:s3cret-pw", "http://" + ns.peer + ":9437/api/findings"}, 400},
	} {
		code, body := curl(t, c.args...)
		if code != c.want {
			t.Errorf("curl %s: %d, want %d\n%s", strings.Join(c.args, " "), code, c.want, body)
		}
	}

	promAddr, pdir := startPrometheus(t, fmt.Sprintf(`
  - job_name: sysray-tls
    scheme: https
    tls_config:
      ca_file: %s
    basic_auth:
      username: prom
      password: s3cret-pw
    static_configs:
      - targets: ["%s:9437"]
  - job_name: sysray-noauth
    scheme: https
    tls_config:
      ca_file: %s
    static_configs:
      - targets: ["%s:9437"]
`, caFile, ns.peer, caFile, ns.peer))
	want := map[string]float64{`up{job="sysray-tls"}`: 1, `up{job="sysray-noauth"}`: 0,
		`count(sysray_agent_last_read_timestamp_seconds{job="sysray-tls"})`: 1}
	for q, w := range want {
		got, raw := -1.0, ""
		for deadline := time.Now().Add(30 * time.Second); got != w && time.Now().Before(deadline); time.Sleep(time.Second) {
			got, raw = promQuery(t, promAddr, q)
		}
		if got != w {
			b, _ := os.ReadFile(filepath.Join(pdir, "prometheus.log"))
			t.Errorf("Prometheus: %s = %v (%s), want %v\n%s", q, got, raw, w, b)
		}
	}
	if code, _ := a.stop(t); code != 0 {
		t.Errorf("agent exit status %d", code)
	}
}

// newCA writes a CA (ca.crt) and a server certificate it signed for ip
// (server.crt, server.key) into dir, and returns the CA's path.
func newCA(t *testing.T, dir, ip string) string {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sysray test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvKey := key()
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.ParseIP(ip), net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write("ca.crt", "CERTIFICATE", caDER)
	write("server.crt", "CERTIFICATE", srvDER)
	write("server.key", "EC PRIVATE KEY", keyDER)
	return filepath.Join(dir, "ca.crt")
}
