package redact

import (
	"slices"
	"testing"
)

func TestArgv(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"app", "--password=hunter2", "-v"}, []string{"app", "--password=<redacted>", "-v"}},
		{[]string{"app", "--password", "hunter2", "-v"}, []string{"app", "--password", "<redacted>", "-v"}},
		{[]string{"app", "--db-token", "abc"}, []string{"app", "--db-token", "<redacted>"}},
		{[]string{"env", "AWS_SECRET_ACCESS_KEY=wJalrXUtn", "GITHUB_TOKEN=ghp_x", "LANG=C"},
			[]string{"env", "AWS_SECRET_ACCESS_KEY=<redacted>", "GITHUB_TOKEN=<redacted>", "LANG=C"}},
		{[]string{"psql", "postgres://app:s3cr3t@db:5432/x"}, []string{"psql", "postgres://app:<redacted>@db:5432/x"}},
		{[]string{"sh", "-c", "exec server --port 80 --password=hunter2 --api-key 'k e y' && true"},
			[]string{"sh", "-c", "exec server --port 80 --password=<redacted> --api-key <redacted> && true"}},
		{[]string{"curl", "-H", "Authorization: Bearer eyJhbGciOi.x.y", "https://u:p@h/"},
			[]string{"curl", "-H", "Authorization: Bearer <redacted>", "https://u:<redacted>@h/"}},
		{[]string{"mysql", "MYSQL_PWD=x", "--pwd=y"}, []string{"mysql", "MYSQL_PWD=<redacted>", "--pwd=<redacted>"}},
		// Where a secret is kept is no secret, nor is a flag with no value.
		{[]string{"app", "--password-file", "/run/secrets/pw", "--token-path=/t", "--no-password", "-x"},
			[]string{"app", "--password-file", "/run/secrets/pw", "--token-path=/t", "--no-password", "-x"}},
		{[]string{"ls", "-l", "/tmp/tokenizer", "a=b"}, []string{"ls", "-l", "/tmp/tokenizer", "a=b"}},
		{nil, nil},
	} {
		got := Argv(c.in)
		if !slices.Equal(got, c.want) {
			t.Errorf("Argv(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestArgvCopies(t *testing.T) {
	in := []string{"app", "--token=x"}
	Argv(in)
	if in[1] != "--token=x" {
		t.Errorf("Argv changed its input: %q", in)
	}
	clean := []string{"ls", "-l"}
	if got := Argv(clean); &got[0] != &clean[0] {
		t.Error("Argv copied a command line with nothing to hide")
	}
}

func TestKeep(t *testing.T) {
	Keep(true)
	defer Keep(false)
	in := []string{"app", "--password=hunter2"}
	if got := Argv(in); !slices.Equal(got, in) {
		t.Errorf("with Keep, Argv(%q) = %q", in, got)
	}
}
