package otlp

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configtls"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// pki is a CA, a certificate for 127.0.0.1 and one for a client that it
// signed, ECDSA P-256, as PEM files in a temporary directory.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	genKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	now := time.Now()
	caKey := genKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sysray test CA"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	issue := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		k := genKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "sysray test " + name}, NotBefore: now.Add(-time.Hour),
			NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
	p := pki{ca: write("ca.pem", "CERTIFICATE", caDER)}
	p.serverCert, p.serverKey = issue("server", 2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = issue("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

// metaSink is a LogsSink that also keeps one header of each request, as
// the receiver hands it on with include_metadata.
type metaSink struct {
	consumertest.LogsSink
	header string
	mu     sync.Mutex
	values [][]string // the header's values, a request each
}

func (s *metaSink) seen() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.values...)
}

// receiveTLS starts the collector's OTLP receiver over HTTPS on
// loopback, with p's server certificate, requiring a client certificate
// that p's CA signed, and passing the requests' headers on to the
// consumer (include_metadata). It returns the /v1/logs URL.
func receiveTLS(t *testing.T, p pki, header string) (string, *metaSink) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	sc := &cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig
	sc.NetAddr.Endpoint = addr
	sc.IncludeMetadata = true
	tc := configtls.NewDefaultServerConfig()
	tc.CertFile, tc.KeyFile, tc.ClientCAFile = p.serverCert, p.serverKey, p.ca
	sc.TLS = configoptional.Some(tc)
	sink := &metaSink{header: header}
	next, err := consumer.NewLogs(func(ctx context.Context, ld plog.Logs) error {
		sink.mu.Lock()
		sink.values = append(sink.values, client.FromContext(ctx).Metadata.Get(header))
		sink.mu.Unlock()
		return sink.ConsumeLogs(ctx, ld)
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, next)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	return "https://" + addr + "/v1/logs", sink
}

// Against the collector's OTLP receiver over mutual TLS, with certificates
// made by the test: the agent given the CA, its client certificate and a
// token in OTEL_EXPORTER_OTLP_HEADERS (as the Helm chart passes it, from
// a Secret) delivers the crash's record, and the receiver's consumer sees
// the token; the agent's log names the header but never shows its value.
// An agent without a client certificate, and one trusting another CA,
// deliver nothing and count every failed request and the dropped record.
// Mistakes in the files stop the agent at start with what is wrong.
func TestOTLPMutualTLS(t *testing.T) {
	requireBPF(t)
	t.Parallel()
	sysray, segv := build(t, "segv-tls")
	p, other := newPKI(t), newPKI(t)
	url, sink := receiveTLS(t, p, "Authorization")
	const secret = "s3cret-t0ken/+=="

	// Refused at start, with a message and exit status 1: no panic, no
	// connection.
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600)
	open := filepath.Join(t.TempDir(), "headers")
	os.WriteFile(open, []byte("Authorization: Bearer "+secret+"\n"), 0o644)
	os.Chmod(open, 0o644)
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--otlp-ca-file", notPEM}, nil, "no PEM certificate"},
		{[]string{"--otlp-ca-file", filepath.Join(t.TempDir(), "none")}, nil, "no such file"},
		{[]string{"--otlp-client-cert", p.clientCert}, nil, "--otlp-client-cert without --otlp-client-key"},
		{[]string{"--otlp-client-cert", p.clientCert, "--otlp-client-key", other.clientKey}, nil, "private key does not match"},
		{[]string{"--otlp-headers-file", open}, nil, "permissions 0644 are too open"},
		{nil, []string{"OTEL_EXPORTER_OTLP_HEADERS=Authorization"}, "OTEL_EXPORTER_OTLP_HEADERS"},
		{nil, []string{"OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE=" + notPEM}, "OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE " + notPEM + ": no PEM certificate"},
	} {
		cmd := exec.Command(sysray, append([]string{"agent", "--listen", "127.0.0.1:0", "--capture-dir", "", "--otlp-endpoint", url}, tc.args...)...)
		cmd.Env = append(os.Environ(), tc.env...)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "panic") || strings.Contains(string(out), secret) {
			t.Errorf("%v %v: %v, %q; want exit status 1 and %q", tc.env, tc.args, err, out, tc.want)
		}
	}
	if n := sink.LogRecordCount(); n != 0 {
		t.Fatalf("%d records before any agent ran", n)
	}

	a := startAgentEnv(t, sysray, []string{"OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20" + strings.ReplaceAll(secret, "+", "%2B")},
		"--otlp-endpoint", url, "--otlp-ca-file", p.ca, "--otlp-client-cert", p.clientCert, "--otlp-client-key", p.clientKey)
	pid := crash(t, segv)
	var got bool
	for i := 0; i < 100 && !got; i++ {
		time.Sleep(200 * time.Millisecond)
		for _, r := range records(&sink.LogsSink) {
			got = got || str(r.Attributes(), "sysray.finding.id") == "fatal-signal" && str(r.Attributes(), "process.pid") == strconv.Itoa(pid)
		}
	}
	if !got {
		t.Fatalf("no fatal-signal record for segv's child %d over mutual TLS after 20 s; the receiver got %d records", pid, sink.LogRecordCount())
	}
	reqs := sink.seen()
	if len(reqs) == 0 {
		t.Error("the consumer saw no request's metadata")
	}
	for _, v := range reqs {
		if len(v) != 1 || v[0] != "Bearer "+secret {
			t.Errorf("a request's Authorization: %q, want the one from OTEL_EXPORTER_OTLP_HEADERS", v)
		}
	}
	m, held := a.settled(t, sink.LogRecordCount)
	if m["sysray_otlp_records_sent_total"] != float64(held) || m["sysray_otlp_export_errors_total"] != 0 {
		t.Errorf("the receiver holds %d records in %d requests; the agent says %v", held, len(reqs), m)
	}
	a.stop(t)
	a.mu.Lock()
	logged := strings.Join(a.out, "\n")
	a.mu.Unlock()
	if strings.Contains(logged, secret) || !strings.Contains(logged, `"headers":["Authorization"],"headers_from":"OTEL_EXPORTER_OTLP_HEADERS"`) {
		t.Errorf("the agent's log shows the token, or does not name the header:\n%s", logged)
	}
	delivered := sink.LogRecordCount()

	// Refused: no client certificate; trusting another CA. Both agents
	// run at once and see the same crash (each waits out three attempts,
	// 2 s and 4 s apart): a finding in the API and a record the agent
	// counts lost.
	type refused struct {
		name string
		a    *agent
	}
	var rs []refused
	for name, args := range map[string][]string{
		"no client certificate": {"--otlp-ca-file", p.ca},
		"another CA":            {"--otlp-ca-file", other.ca, "--otlp-client-cert", p.clientCert, "--otlp-client-key", p.clientKey},
	} {
		rs = append(rs, refused{name, startAgent(t, sysray, append([]string{"--otlp-endpoint", url, "--otlp-header", "Authorization=Bearer " + secret}, args...)...)})
	}
	pid = crash(t, segv)
	title := filepath.Base(segv) + "[" + strconv.Itoa(pid) + "]"
	for _, r := range rs {
		dropped := `sysray_otlp_records_dropped_total{reason="export_failed"}`
		var m map[string]float64
		found := false
		for i := 0; i < 100 && !(found && m[dropped] >= 1); i++ {
			time.Sleep(200 * time.Millisecond)
			for _, x := range r.a.findings(t) {
				found = found || x.ID == "fatal-signal" && strings.Contains(x.Title, title)
			}
			m = r.a.metrics(t, "sysray_otlp_")
		}
		if !found || m[dropped] < 1 || m["sysray_otlp_export_errors_total"] < 3 || m["sysray_otlp_records_sent_total"] != 0 {
			t.Errorf("%s: crash found %v; the agent's counts %v; want the record dropped after 3 failed requests", r.name, found, m)
		}
		r.a.stop(t)
		r.a.mu.Lock()
		logged := strings.Join(r.a.out, "\n")
		r.a.mu.Unlock()
		if strings.Contains(logged, secret) || !strings.Contains(logged, "sending findings over OTLP failed") {
			t.Errorf("%s: the log shows the token, or no failure:\n%s", r.name, logged)
		}
		t.Logf("%s: %v", r.name, m)
	}
	if n := sink.LogRecordCount(); n != delivered {
		t.Errorf("the receiver got %d records from the refused agents", n-delivered)
	}
	t.Logf("over mutual TLS: %d records in %d requests, each with the header", delivered, len(reqs))
}
