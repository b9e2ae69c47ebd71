package redact

import (
	"regexp"
	"strings"
	"sync/atomic"
)

// Mask replaces a hidden value.
const Mask = "<redacted>"

var keep atomic.Bool

// Keep turns redaction off (true) or on for the whole process.
func Keep(k bool) { keep.Store(k) }

// Kept reports whether redaction is off.
func Kept() bool { return keep.Load() }

// secretWords are the parts of a key (a flag's name, a variable's name)
// that say its value is a credential. The list errs on the side of hiding:
// a hidden value that was harmless costs a reader a guess, a shown one that
// was a password cannot be taken back.
var secretWords = []string{
	"password", "passwd", "passphrase", "secret", "token", "apikey", "api_key", "api-key",
	"accesskey", "access_key", "access-key", "privatekey", "private_key", "private-key",
	"credential", "authorization", "cookie", "sessionid", "session_id",
}

// secretKey reports whether a key names a credential. Keys that name
// where a credential is kept (--password-file, TOKEN_PATH) do not: the
// path is what a reader needs, and it is no secret.
func secretKey(k string) bool {
	k = strings.ToLower(strings.TrimLeft(k, "-"))
	if k == "" {
		return false
	}
	for _, s := range []string{"file", "path", "dir", "env", "type", "method", "mode", "len", "length"} {
		if strings.HasSuffix(k, "-"+s) || strings.HasSuffix(k, "_"+s) || strings.HasSuffix(k, "."+s) {
			return false
		}
	}
	if k == "pwd" || strings.HasSuffix(k, "_pwd") || strings.HasSuffix(k, "-pwd") {
		return true
	}
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

var (
	// A URL's user:password@ — the password goes, the user stays.
	userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@'"]*):([^@\s/'"]+)@`)
	// key=value or key: value inside a longer string (a shell's -c
	// script, a JSON blob): the value runs to the next space or quote.
	pair = regexp.MustCompile(`([A-Za-z0-9_.-]+)(=|:\s*)("[^"]*"|'[^']*'|[^\s"',;&]+)`)
	// --flag value inside a longer string.
	flagSpace = regexp.MustCompile(`(^|\s)(--?[A-Za-z0-9_.-]+)(\s+)("[^"]*"|'[^']*'|[^\s"'-][^\s"']*)`)
	// HTTP credentials in a header passed on a command line.
	bearer = regexp.MustCompile(`(?i)\b(bearer|basic)(\s+)([A-Za-z0-9._~+/=-]{8,})`)
	scheme = regexp.MustCompile(`(?i)^(bearer|basic)$`)
)

// String hides the credentials in one string: one argument, or a command
// line joined by spaces.
func String(s string) string {
	if keep.Load() || s == "" {
		return s
	}
	s = userinfo.ReplaceAllString(s, "$1:"+Mask+"@")
	s = pair.ReplaceAllStringFunc(s, func(m string) string {
		sub := pair.FindStringSubmatch(m)
		// "Authorization: Bearer xyz": the scheme stays, bearer hides xyz.
		if !secretKey(sub[1]) || sub[3] == Mask || scheme.MatchString(sub[3]) {
			return m
		}
		return sub[1] + sub[2] + Mask
	})
	s = flagSpace.ReplaceAllStringFunc(s, func(m string) string {
		sub := flagSpace.FindStringSubmatch(m)
		if !secretKey(sub[2]) {
			return m
		}
		return sub[1] + sub[2] + sub[3] + Mask
	})
	return bearer.ReplaceAllString(s, "$1$2"+Mask)
}

// Argv hides the credentials in a command line: in each argument (see
// String), and the argument after a flag that names one (--password
// hunter2). It returns argv itself when nothing was hidden, else a copy.
func Argv(argv []string) []string {
	if keep.Load() {
		return argv
	}
	var out []string
	set := func(i int, v string) {
		if out == nil {
			out = append([]string(nil), argv...)
		}
		out[i] = v
	}
	for i, a := range argv {
		if i > 0 && isSecretFlag(argv[i-1]) && a != "" && !strings.HasPrefix(a, "-") {
			set(i, Mask)
			continue
		}
		if r := String(a); r != a {
			set(i, r)
		}
	}
	if out == nil {
		return argv
	}
	return out
}

// isSecretFlag reports whether a is a flag without a value of its own
// whose name says the next argument is a credential.
func isSecretFlag(a string) bool {
	return strings.HasPrefix(a, "-") && !strings.ContainsAny(a, "= ") && secretKey(a)
}
