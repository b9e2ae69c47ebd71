package agent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// OTEL_EXPORTER_OTLP_HEADERS's format: pairs split at commas, space
// around them dropped, values percent-decoded ("+" is a plus, not a
// space), names canonical, a name given twice sent twice.
func TestParseOTLPHeaders(t *testing.T) {
	h, err := ParseOTLPHeaders(" api-key = s3cr%2Ct%20one ,X-Scope-OrgID=tenant+1,, x-dup=a,X-Dup=b%3D%3D")
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 || h.Get("Api-Key") != "s3cr,t one" || h.Get("X-Scope-Orgid") != "tenant+1" || !slices.Equal(h.Values("X-Dup"), []string{"a", "b=="}) {
		t.Errorf("%v", h)
	}
	for _, bad := range []string{
		"secret",                        // no =
		"=Bearer secret",                // no name
		"Bearer secret=xyz",             // a space in the name: a token where the name goes
		"secret:b=c",                    // a colon in the name
		"a=1,b=Bearer%zzsecret",         // not percent-encoded
		"authorization=Bearer%0Asecret", // a newline, decoded
		"ok=1,secret",
	} {
		_, err := ParseOTLPHeaders(bad)
		if err == nil {
			t.Errorf("%q: no error", bad)
			continue
		}
		// The error points at the pair, never shows a credential.
		if strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "pair ") {
			t.Errorf("%q: %v; want the pair's number and no secret", bad, err)
		}
	}
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Headers come whole from the first source that has any: the flags, then
// the logs' variable, then the generic one; within the flags,
// --otlp-header wins over the file for a name in both.
func TestOTLPHeadersPrecedence(t *testing.T) {
	const u = "http://127.0.0.1:4318/v1/logs"
	both := map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "authorization=generic,x-generic=1", "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "authorization=logs"}
	c, err := OTLPAuth{}.resolve(u, env(both))
	if err != nil {
		t.Fatal(err)
	}
	if c.header.Get("Authorization") != "logs" || c.header.Get("X-Generic") != "" || c.from != "OTEL_EXPORTER_OTLP_LOGS_HEADERS" {
		t.Errorf("both variables: %v from %s; want the logs' variable's only", c.header, c.from)
	}
	c, err = OTLPAuth{}.resolve(u, env(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "authorization=generic"}))
	if err != nil || c.header.Get("Authorization") != "generic" {
		t.Errorf("the generic variable: %v %v", c, err)
	}
	file := writeFile(t, "headers", "# the tenant's\nAuthorization: Bearer from-file\n\nX-Scope-OrgID=team-a\n  x-a : b:c=d  \n", 0o600)
	c, err = OTLPAuth{Headers: []string{"authorization=Bearer from-flag", "X-Extra=a=b"}, HeadersFile: file}.resolve(u, env(both))
	if err != nil {
		t.Fatal(err)
	}
	want := http.Header{"Authorization": {"Bearer from-flag"}, "X-Scope-Orgid": {"team-a"}, "X-A": {"b:c=d"}, "X-Extra": {"a=b"}}
	if len(c.header) != len(want) || c.from != "--otlp-headers-file and --otlp-header" || !slices.Equal(c.names, []string{"Authorization", "X-A", "X-Extra", "X-Scope-Orgid"}) {
		t.Errorf("flags over the variables: %v from %s, names %v; want %v", c.header, c.from, c.names, want)
	}
	for k, v := range want {
		if !slices.Equal(c.header[k], v) {
			t.Errorf("%s: %v, want %v", k, c.header[k], v)
		}
	}
	for _, bad := range []string{"Authorization: secret", "=secret", "a secret=c", "x=a\rsecret"} {
		_, err := (OTLPAuth{Headers: []string{"ok=1", bad}}).resolve(u, env(nil))
		if err == nil || !strings.Contains(err.Error(), "--otlp-header (the 2nd)") || strings.Contains(err.Error(), "secret") {
			t.Errorf("--otlp-header %q: %v; want an error naming the 2nd, without the secret", bad, err)
		}
	}
	if _, err := (OTLPAuth{}).resolve(u, env(map[string]string{"OTEL_EXPORTER_OTLP_LOGS_HEADERS": "k=%zz"})); err == nil ||
		!strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_LOGS_HEADERS") {
		t.Errorf("a malformed variable: %v", err)
	}
}

// Like ssh with a key, a headers file others may read is refused, with
// what to do; one line that is no header is an error with its number.
func TestOTLPHeadersFile(t *testing.T) {
	const u = "http://127.0.0.1:4318/v1/logs"
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620} {
		f := writeFile(t, "headers", "Authorization: Bearer secret\n", mode)
		_, err := OTLPAuth{HeadersFile: f}.resolve(u, env(nil))
		if err == nil || !strings.Contains(err.Error(), "too open") || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: %v; want refused", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		f := writeFile(t, "headers", "Authorization: Bearer secret\n", mode)
		if c, err := (OTLPAuth{HeadersFile: f}).resolve(u, env(nil)); err != nil || c.header.Get("Authorization") != "Bearer secret" {
			t.Errorf("mode %04o: %v %v", mode, c, err)
		}
	}
	f := writeFile(t, "headers", "A: 1\nBearer secret\n", 0o600)
	if _, err := (OTLPAuth{HeadersFile: f}).resolve(u, env(nil)); err == nil || !strings.Contains(err.Error(), "line 2") || strings.Contains(err.Error(), "secret") {
		t.Errorf("a line without a separator: %v", err)
	}
	if _, err := (OTLPAuth{HeadersFile: filepath.Join(t.TempDir(), "none")}).resolve(u, env(nil)); err == nil {
		t.Error("a missing file: no error")
	}
}

// TLS settings: each file from its flag, else the logs' variable, else
// the generic one; the client certificate and key as a pair; every
// mistake an error at start, never a connection in the clear.
func TestOTLPTLSSettings(t *testing.T) {
	const u = "https://127.0.0.1:4318/v1/logs"
	pki := newTestPKI(t)
	other := newTestPKI(t)
	c, err := OTLPAuth{}.resolve(u, env(nil))
	if err != nil || c.tls == nil || c.tls.MinVersion != tls.VersionTLS12 || c.tls.RootCAs != nil || c.ca != "system" {
		t.Errorf("https without files: %+v %v; want TLS 1.2 and up with the system's CAs", c, err)
	}
	c, err = OTLPAuth{}.resolve(u, env(map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": other.ca, "OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE": pki.ca,
		"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": pki.cert, "OTEL_EXPORTER_OTLP_CLIENT_KEY": pki.key}))
	if err != nil || c.ca != pki.ca || c.cert != pki.cert || len(c.tls.Certificates) != 1 {
		t.Errorf("the variables: %+v %v; want the logs' CA and the generic client pair", c, err)
	}
	c, err = OTLPAuth{CAFile: other.ca}.resolve(u, env(map[string]string{"OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE": pki.ca}))
	if err != nil || c.ca != other.ca {
		t.Errorf("the flag over the variable: %+v %v", c, err)
	}
	notPEM := writeFile(t, "ca.pem", "not a certificate\n", 0o644)
	for _, tc := range []struct {
		name string
		a    OTLPAuth
		env  map[string]string
		url  string
		want string
	}{
		{"cert without key", OTLPAuth{ClientCert: pki.cert}, nil, u, "--otlp-client-cert without --otlp-client-key"},
		{"key without cert", OTLPAuth{ClientKey: pki.key}, nil, u, "--otlp-client-key without --otlp-client-cert"},
		{"env cert without key", OTLPAuth{}, map[string]string{"OTEL_EXPORTER_OTLP_LOGS_CLIENT_CERTIFICATE": pki.cert}, u,
			"OTEL_EXPORTER_OTLP_LOGS_CLIENT_CERTIFICATE without OTEL_EXPORTER_OTLP_LOGS_CLIENT_KEY"},
		// A pair is not made of a flag and a variable.
		{"flag cert, env key", OTLPAuth{ClientCert: pki.cert}, map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_KEY": pki.key}, u, "--otlp-client-cert without"},
		{"ca not PEM", OTLPAuth{CAFile: notPEM}, nil, u, "no PEM certificate"},
		{"ca missing", OTLPAuth{CAFile: filepath.Join(t.TempDir(), "none")}, nil, u, "no such file"},
		{"key of another cert", OTLPAuth{ClientCert: pki.cert, ClientKey: other.key}, nil, u, "private key does not match"},
		{"key not PEM", OTLPAuth{ClientCert: pki.cert, ClientKey: notPEM}, nil, u, "--otlp-client-key"},
		{"ca with http", OTLPAuth{CAFile: pki.ca}, nil, "http://127.0.0.1:4318/v1/logs", "--otlp-ca-file is for an https:// endpoint"},
		{"env ca with http", OTLPAuth{}, map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": pki.ca}, "http://127.0.0.1:4318/v1/logs",
			"OTEL_EXPORTER_OTLP_CERTIFICATE is for an https:// endpoint"},
		{"client cert with http", OTLPAuth{ClientCert: pki.cert, ClientKey: pki.key}, nil, "http://127.0.0.1:4318/v1/logs", "is for an https:// endpoint"},
	} {
		if _, err := tc.a.resolve(tc.url, env(tc.env)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error with %q", tc.name, err, tc.want)
		}
	}
	// Config.Check reads them at start.
	cfg := Defaults
	cfg.OTLPEndpoint, cfg.OTLPAuth = u, OTLPAuth{CAFile: notPEM}
	if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("Check with a CA file that is not PEM: %v", err)
	}
	cfg.OTLPEndpoint = ""
	if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), "are for --otlp-endpoint") {
		t.Errorf("Check with --otlp-ca-file and no endpoint: %v", err)
	}
}

// Over mutual TLS, with the test's own CA: the records arrive with the
// headers; without the client certificate, or trusting another CA, every
// request fails and is counted, and the record is counted dropped.
func TestOTLPMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	rc := &receiver{}
	srv := httptest.NewUnstartedServer(rc)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pki.server}, ClientCAs: pki.pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	srv.StartTLS()
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "")
	t.Setenv("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "")
	run := func(a OTLPAuth) *OTLP {
		res, _ := ResourceAttrs("node-1", "")
		o, err := NewOTLP(srv.URL, a, res, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		o.backoff = []time.Duration{10 * time.Millisecond, 10 * time.Millisecond}
		ctx, cancel := context.WithCancel(context.Background())
		go o.Run(ctx)
		t.Cleanup(func() { cancel(); <-o.Done() })
		o.Send(record(1))
		return o
	}
	o := run(OTLPAuth{CAFile: pki.ca, ClientCert: pki.cert, ClientKey: pki.key, Headers: []string{"Authorization=Bearer t0ken", "X-Scope-OrgID=team-a"}})
	waitFor(t, "the record over mutual TLS", func() bool { _, n := rc.got(); return n == 1 })
	rc.mu.Lock()
	h := rc.header
	rc.mu.Unlock()
	if h.Get("Authorization") != "Bearer t0ken" || h.Get("X-Scope-OrgID") != "team-a" || h.Get("Content-Type") != "application/x-protobuf" {
		t.Errorf("headers %v", h)
	}
	if s := value(o, "sysray_otlp_records_sent_total", ""); s != 1 {
		t.Errorf("sent %v, want 1", s)
	}
	other := newTestPKI(t)
	for name, a := range map[string]OTLPAuth{
		"no client certificate": {CAFile: pki.ca},
		"another CA":            {CAFile: other.ca, ClientCert: pki.cert, ClientKey: pki.key},
		"the system's CAs":      {ClientCert: pki.cert, ClientKey: pki.key},
	} {
		o := run(a)
		waitFor(t, name+": the record dropped", func() bool { return value(o, "sysray_otlp_records_dropped_total", "export_failed") == 1 })
		if e, s := value(o, "sysray_otlp_export_errors_total", ""), value(o, "sysray_otlp_records_sent_total", ""); e != 3 || s != 0 {
			t.Errorf("%s: errors %v, sent %v; want 3 attempts failed, none sent", name, e, s)
		}
	}
	if r, n := rc.got(); n != 1 {
		t.Errorf("%d requests, %d records: want only the first agent's", r, n)
	}
}

func writeFile(t *testing.T, name, s string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(s), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return p
}

// testPKI is a CA, a server certificate for 127.0.0.1 and a client
// certificate it signed, ECDSA P-256, the files in a temporary directory.
type testPKI struct {
	ca, cert, key string // PEM files: the CA's certificate, the client's certificate and key
	pool          *x509.CertPool
	server        tls.Certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sysray test CA"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage) ([]byte, []byte, tls.Certificate) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "sysray test"}, NotBefore: now.Add(-time.Hour),
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
		c := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		kp := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
		pair, err := tls.X509KeyPair(c, kp)
		if err != nil {
			t.Fatal(err)
		}
		return c, kp, pair
	}
	p := &testPKI{ca: filepath.Join(dir, "ca.pem"), cert: filepath.Join(dir, "client.pem"), key: filepath.Join(dir, "client-key.pem"), pool: x509.NewCertPool()}
	p.pool.AddCert(caCert)
	_, _, p.server = issue(2, x509.ExtKeyUsageServerAuth)
	cc, ck, _ := issue(3, x509.ExtKeyUsageClientAuth)
	for f, b := range map[string][]byte{p.ca: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), p.cert: cc, p.key: ck} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// A redirect is not followed: the headers and the records stay with the
// endpoint given, and the answer counts as a failed request.
func TestOTLPNoRedirect(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "")
	t.Setenv("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "")
	elsewhere := &receiver{}
	other := httptest.NewServer(elsewhere)
	defer other.Close()
	redir := httptest.NewServer(http.RedirectHandler(other.URL+"/v1/logs", http.StatusTemporaryRedirect))
	defer redir.Close()
	res, _ := ResourceAttrs("node-1", "")
	o, err := NewOTLP(redir.URL, OTLPAuth{Headers: []string{"X-Api-Key=secret"}}, res, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go o.Run(ctx)
	defer func() { cancel(); <-o.Done() }()
	o.Send(record(1))
	waitFor(t, "the record dropped", func() bool { return value(o, "sysray_otlp_records_dropped_total", "export_failed") == 1 })
	if r, _ := elsewhere.got(); r != 0 || value(o, "sysray_otlp_export_errors_total", "") != 1 {
		t.Errorf("%d requests at the redirect's target, %v errors; want none and 1", r, value(o, "sysray_otlp_export_errors_total", ""))
	}
}
