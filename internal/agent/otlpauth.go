package agent

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
)

// OTLPAuth is how the exporter proves itself to the receiver and checks
// the receiver: headers (a token, a tenant) and TLS files, from the flags
// or from the OpenTelemetry SDKs' environment variables (docs/agent.md,
// "Findings over OTLP").
type OTLPAuth struct {
	Headers     []string // --otlp-header values, Name=Value
	HeadersFile string   // --otlp-headers-file
	CAFile      string   // --otlp-ca-file
	ClientCert  string   // --otlp-client-cert
	ClientKey   string   // --otlp-client-key
}

// otlpConn is an OTLPAuth resolved against the environment and read:
// what the exporter's requests carry.
type otlpConn struct {
	header http.Header
	names  []string // the headers' names, sorted, for the logs: never the values
	from   string   // where the headers came from
	tls    *tls.Config
	ca     string // where the trusted CAs came from: a file, or "system"
	cert   string // the client certificate's file, "" for none
}

// The environment variables, most specific first: the logs' own wins
// over the generic one, as in the SDKs.
var (
	envOTLPHeaders    = []string{"OTEL_EXPORTER_OTLP_LOGS_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"}
	envOTLPCA         = []string{"OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE"}
	envOTLPClientCert = []string{"OTEL_EXPORTER_OTLP_LOGS_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"}
	envOTLPClientKey  = []string{"OTEL_EXPORTER_OTLP_LOGS_CLIENT_KEY", "OTEL_EXPORTER_OTLP_CLIENT_KEY"}
)

// resolve reads a's files and the environment (getenv) for endpoint, an
// OTLPEndpoint URL. Headers come whole from the first source that has
// any: the flags (--otlp-headers-file, then --otlp-header, which wins for
// a name in both), OTEL_EXPORTER_OTLP_LOGS_HEADERS,
// OTEL_EXPORTER_OTLP_HEADERS. Sources are not merged: a generic variable's
// header may be a credential for another receiver, and the SDKs take the
// logs' variable instead of the generic one too. Each TLS file comes from
// its flag, else the logs' variable, else the generic one; the client
// certificate and key come as a pair from the first of these that names
// either.
func (a OTLPAuth) resolve(endpoint string, getenv func(string) string) (*otlpConn, error) {
	c := &otlpConn{header: http.Header{}}
	if a.HeadersFile != "" || len(a.Headers) > 0 {
		var from []string
		if a.HeadersFile != "" {
			hs, err := readHeadersFile(a.HeadersFile)
			if err != nil {
				return nil, fmt.Errorf("--otlp-headers-file %s: %w", a.HeadersFile, err)
			}
			for _, h := range hs {
				c.header.Set(h[0], h[1])
			}
			from = append(from, "--otlp-headers-file")
		}
		if len(a.Headers) > 0 {
			flag := http.Header{}
			for i, s := range a.Headers {
				k, v, err := parseHeader(s, "=")
				if err != nil {
					return nil, fmt.Errorf("--otlp-header (the %s): %w", ordinal(i+1), err)
				}
				flag.Add(k, v)
			}
			for k, v := range flag {
				c.header[k] = v
			}
			from = append(from, "--otlp-header")
		}
		c.from = strings.Join(from, " and ")
	} else {
		for _, env := range envOTLPHeaders {
			s := getenv(env)
			if strings.TrimSpace(s) == "" {
				continue
			}
			h, err := ParseOTLPHeaders(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", env, err)
			}
			c.header, c.from = h, env
			break
		}
	}
	for k := range c.header {
		c.names = append(c.names, k)
	}
	slices.Sort(c.names)

	ca, caFrom := pick(a.CAFile, "--otlp-ca-file", getenv, envOTLPCA)
	cert, key, certFrom, keyFrom := a.ClientCert, a.ClientKey, "--otlp-client-cert", "--otlp-client-key"
	if cert == "" && key == "" {
		for i := range envOTLPClientCert {
			cert, key, certFrom, keyFrom = getenv(envOTLPClientCert[i]), getenv(envOTLPClientKey[i]), envOTLPClientCert[i], envOTLPClientKey[i]
			if cert != "" || key != "" {
				break
			}
		}
	}
	switch {
	case cert != "" && key == "":
		return nil, fmt.Errorf("%s without %s: a client certificate needs its key", certFrom, keyFrom)
	case key != "" && cert == "":
		return nil, fmt.Errorf("%s without %s: a client key needs its certificate", keyFrom, certFrom)
	}
	if !strings.HasPrefix(endpoint, "https://") {
		// Files for TLS with a plaintext URL: a mistake in one or the
		// other, and the records must not go out in the clear by it.
		if ca != "" {
			return nil, fmt.Errorf("%s is for an https:// endpoint, not %s", caFrom, endpoint)
		}
		if cert != "" {
			return nil, fmt.Errorf("%s is for an https:// endpoint, not %s", certFrom, endpoint)
		}
		return c, nil
	}
	// TLS 1.2 and up: what the OpenTelemetry SDKs and the collector
	// require by default; older versions have known weaknesses.
	c.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	c.ca = "system"
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", caFrom, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s: no PEM certificate in it", caFrom, ca)
		}
		c.tls.RootCAs, c.ca = pool, ca
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s %s, %s %s: %w", certFrom, cert, keyFrom, key, err)
		}
		c.tls.Certificates, c.cert = []tls.Certificate{pair}, cert
	}
	return c, nil
}

// pick is flag when it is set (named name), else the first variable of
// envs that is set, and where it came from.
func pick(flag, name string, getenv func(string) string, envs []string) (string, string) {
	if flag != "" {
		return flag, name
	}
	for _, e := range envs {
		if v := getenv(e); v != "" {
			return v, e
		}
	}
	return "", ""
}

// ParseOTLPHeaders reads OTEL_EXPORTER_OTLP_HEADERS's format: name=value
// pairs separated by commas, values percent-encoded (the OpenTelemetry
// specification's W3C-baggage-like list). Space around names and values
// is not theirs. Anything else is an error, not a header left out: a
// request without its credentials would be refused for a reason the logs
// would not name.
func ParseOTLPHeaders(s string) (http.Header, error) {
	h := http.Header{}
	n := 0
	for _, p := range strings.Split(s, ",") {
		if strings.TrimSpace(p) == "" {
			continue
		}
		n++
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("pair %d: want name=value", n)
		}
		v, err := url.PathUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("pair %d: the value is not percent-encoded (%%XX)", n)
		}
		k, v, err = checkHeader(k, v)
		if err != nil {
			return nil, fmt.Errorf("pair %d: %w", n, err)
		}
		h.Add(k, v)
	}
	return h, nil
}

// parseHeader reads "Name<sep>Value", the value as it stands.
func parseHeader(s, seps string) (string, string, error) {
	i := strings.IndexAny(s, seps)
	if i < 0 {
		if strings.Contains(seps, ":") {
			return "", "", errors.New("want Name: Value or Name=Value")
		}
		return "", "", errors.New("want Name=Value")
	}
	return checkHeader(s[:i], s[i+1:])
}

// checkHeader trims name and value and says what makes them no header.
// Its errors show no value, nor a name that is not one: a malformed pair
// may be a credential put where a name goes.
func checkHeader(name, value string) (string, string, error) {
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	if name == "" {
		return "", "", errors.New("a header without a name")
	}
	for _, r := range name {
		// RFC 9110's token characters.
		if r > 0x7e || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return "", "", errors.New("the name is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~)")
		}
	}
	for _, r := range value {
		if r < ' ' && r != '\t' || r == 0x7f {
			return "", "", fmt.Errorf("%s: a control character in the value", name)
		}
	}
	return http.CanonicalHeaderKey(name), value, nil
}

// readHeadersFile reads a headers file: "Name: Value" or "Name=Value" a
// line, blank lines and lines starting with # left out. Like ssh with a
// private key, it refuses a file that others than its owner may read or
// write: its point is to keep the values out of /proc/PID/cmdline, which
// every user reads.
func readHeadersFile(path string) ([][2]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if m := st.Mode().Perm(); m&0o077 != 0 {
		return nil, fmt.Errorf("permissions %04o are too open: it holds credentials, so only its owner may read it (chmod 600 %s)", m, path)
	}
	var out [][2]string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' {
			continue
		}
		k, v, err := parseHeader(l, ":=")
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, [2]string{k, v})
	}
	return out, sc.Err()
}

func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return fmt.Sprintf("%dth", n)
	case n%10 == 1:
		return fmt.Sprintf("%dst", n)
	case n%10 == 2:
		return fmt.Sprintf("%dnd", n)
	case n%10 == 3:
		return fmt.Sprintf("%drd", n)
	}
	return fmt.Sprintf("%dth", n)
}
