package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v2"
)

// The agent's findings and captures hold other processes' command lines,
// paths and addresses. Metrics and health are meant for the network; the
// API is not, unless whoever asks proves who they are over TLS. So the API
// is served on a listener only if that listener is private (a unix socket,
// or loopback) or protected (a web config, as Prometheus exporters take
// with --web.config.file, that turns TLS on and requires basic auth or a
// client certificate). docs/agent.md, "Exposure".

// DefaultAPISocket is where the API goes when --listen is neither private
// nor protected and --api-listen is not given.
const DefaultAPISocket = "unix:/run/sysray/api.sock"

// webConfig is what the agent needs to know of a --web.config.file.
type webConfig struct {
	path string
}

// protected reads the file now and says whether it turns TLS on and
// requires a password or a client certificate. It is read at each API
// request, as exporter-toolkit reads it at each connection: a file whose
// authentication was taken out while the agent ran must close the API, not
// leave it open.
func (w webConfig) protected() (bool, error) {
	if w.path == "" {
		return false, nil
	}
	b, err := os.ReadFile(w.path)
	if err != nil {
		return false, err
	}
	var c web.Config
	if err := yaml.Unmarshal(b, &c); err != nil {
		return false, fmt.Errorf("%s: %w", w.path, err)
	}
	tls := c.TLSConfig.TLSCertPath != "" || c.TLSConfig.TLSCert != ""
	auth := len(c.Users) > 0 || c.TLSConfig.ClientAuth == "RequireAndVerifyClientCert"
	return tls && auth, nil
}

// listen opens addr: "unix:PATH" for a unix socket (mode 0600, in a
// directory only root may enter when the agent makes it), else host:port.
func listen(addr string) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, "unix:")
	if !ok {
		return net.Listen("tcp", addr)
	}
	if path == "" {
		return nil, errors.New("unix: needs a path")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	// A socket left by an agent that was killed is in the way; anything
	// else at the path is not ours to remove.
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another agent is serving it", path)
		}
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// private reports whether only this host's processes can reach ln.
func private(ln net.Listener) bool {
	switch a := ln.Addr().(type) {
	case *net.UnixAddr:
		return true
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	}
	return false
}

// serve serves h on ln until it is closed, with the web config's TLS and
// authentication on TCP listeners. A unix socket's mode is its guard.
func serve(srv *http.Server, ln net.Listener, w webConfig, log *slog.Logger) error {
	path := w.path
	if _, ok := ln.Addr().(*net.UnixAddr); ok {
		path = ""
	}
	return web.Serve(ln, srv, &web.FlagConfig{WebConfigFile: &path, WebListenAddresses: &[]string{where(ln)}}, log)
}

// where names ln's address as --listen takes it.
func where(ln net.Listener) string {
	if a, ok := ln.Addr().(*net.UnixAddr); ok {
		return "unix:" + a.Name
	}
	return ln.Addr().String()
}

// apiGuard serves the API on a listener that may carry it: private, or
// protected by the web config at the time of the request. Elsewhere it
// refuses, saying where the API is.
func apiGuard(h http.Handler, ln net.Listener, w webConfig, elsewhere string) http.Handler {
	priv := private(ln)
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if fromWebPage(r) {
			writeJSON(rw, http.StatusForbidden, map[string]string{"error": "the API takes no requests from web pages"})
			return
		}
		if priv {
			h.ServeHTTP(rw, r)
			return
		}
		ok, err := w.protected()
		if err != nil || !ok || r.TLS == nil {
			msg := "the API (findings, captures, snapshots) holds other processes' command lines: it is not served on this address without TLS and authentication (--web.config.file)"
			if elsewhere != "" {
				msg += "; it is served on " + elsewhere
			}
			writeJSON(rw, http.StatusForbidden, map[string]string{"error": msg})
			return
		}
		h.ServeHTTP(rw, r)
	})
}

// fromWebPage reports whether a browser made r for a web page, rather than
// for a user who typed the address. Any page the user opens can make the
// browser ask a loopback address, post to it blind (a snapshot), and, with
// DNS rebinding, read the answer (findings); with basic auth cached, the
// same holds beyond loopback. Browsers say so: Sec-Fetch-Site on every
// request (since 2020-2023), Origin on every POST; an older browser's
// rebound request still names the page's host, not an address or
// localhost. Scripts, curl, Prometheus and proxies say none of it.
func fromWebPage(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "none" {
		return true
	}
	if r.Header.Get("Origin") != "" {
		return true
	}
	return strings.Contains(r.Header.Get("User-Agent"), "Mozilla/") && !localHost(r.Host)
}

// localHost reports whether a request's Host names this host's loopback.
func localHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "" || strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
