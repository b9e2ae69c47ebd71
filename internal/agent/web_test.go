package agent

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// addrListener is a listener that only says where it is.
type addrListener struct {
	net.Listener
	addr net.Addr
}

func (l addrListener) Addr() net.Addr { return l.addr }

func TestAPIGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	loop := addrListener{addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9437}}
	wide := addrListener{addr: &net.TCPAddr{IP: net.IPv4zero, Port: 9437}}
	sock := addrListener{addr: &net.UnixAddr{Name: "/run/sysray/api.sock", Net: "unix"}}
	for _, c := range []struct {
		name   string
		ln     net.Listener
		method string
		host   string
		hdr    map[string]string
		want   int
	}{
		{"curl on loopback", loop, "GET", "127.0.0.1:9437", nil, http.StatusTeapot},
		{"curl on the socket", sock, "POST", "localhost", nil, http.StatusTeapot},
		{"typed in a browser", loop, "GET", "localhost:9437", map[string]string{"Sec-Fetch-Site": "none", "User-Agent": "Mozilla/5.0"}, http.StatusTeapot},
		{"a page's fetch", loop, "GET", "127.0.0.1:9437", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"a rebound page's fetch", loop, "GET", "evil.example:9437", map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusForbidden},
		{"an old browser, rebound", loop, "GET", "evil.example:9437", map[string]string{"User-Agent": "Mozilla/4.0"}, http.StatusForbidden},
		{"a page's form", loop, "POST", "127.0.0.1:9437", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"a proxy's Host", loop, "GET", "10.1.2.3:8443", map[string]string{"User-Agent": "kubectl/v1.31"}, http.StatusTeapot},
		{"the network, no web config", wide, "GET", "10.1.2.3:9437", nil, http.StatusForbidden},
	} {
		h := apiGuard(ok, c.ln, webConfig{}, "unix:/run/sysray/api.sock")
		r := httptest.NewRequest(c.method, "http://"+c.host+"/api/findings", nil)
		for k, v := range c.hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("%s: %d, want %d (%s)", c.name, w.Code, c.want, w.Body)
		}
	}
}

// The API goes beyond loopback only with TLS and authentication, as the
// file says at the time of the request.
func TestProtected(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "web.yml")
	for _, c := range []struct {
		yml  string
		want bool
	}{
		{"", false},
		{"tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n", false},
		{"basic_auth_users:\n  u: $2y$10$x\n", false},
		{"tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\nbasic_auth_users:\n  u: $2y$10$x\n", true},
		{"tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n", true},
		{"tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  client_auth_type: RequestClientCert\n", false},
	} {
		os.WriteFile(path, []byte(c.yml), 0o600)
		got, err := webConfig{path: path}.protected()
		if err != nil || got != c.want {
			t.Errorf("%q: %v %v, want %v", c.yml, got, err, c.want)
		}
	}
	if ok, _ := (webConfig{}).protected(); ok {
		t.Error("no web config protects")
	}
	os.Remove(path)
	if ok, err := (webConfig{path: path}).protected(); ok || err == nil {
		t.Errorf("a web config gone: %v %v, want an error", ok, err)
	}
}
