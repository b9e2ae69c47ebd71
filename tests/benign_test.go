package tests

import (
	"crypto/rand"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benignWorkload is real work written by others (compilers, compressors,
// databases, test suites, package tools), run under the doctor as
// `sh -c script sh DIR REPO SHARED [ARGS...]`: $1 is a fresh directory, $2 the
// root of this repository, $3 a directory the whole corpus shares (the Go
// build cache), ARGS what prep returned. The script's output goes to
// $1/out.log.
type benignWorkload struct {
	name   string
	tools  []string // must be on PATH (or absolute paths that exist)
	check  []string // a command that must succeed for the workload to run here
	prep   func(t *testing.T, dir string) []string
	script string
}

const findSha = `find /usr -type f -print0 | head -z -n 20000 | xargs -0 sha256sum > /dev/null`

// warm runs a workload's script once untraced, so its files are in the
// page cache when the doctor watches it.
func warm(script string) func(t *testing.T, dir string) []string {
	return func(t *testing.T, dir string) []string {
		if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
			t.Logf("warming the cache: %v\n%s", err, out)
		}
		return nil
	}
}

// warmCache reads, untraced, the trees the corpus reads, so that it runs on
// a warm page cache whatever ran before it (a test that fills memory leaves
// it cold, and this VM's disk then makes single reads take 100-300 ms,
// which the doctor rightly reports).
func warmCache(t *testing.T) {
	dirs := []string{"/usr/share/doc", "/usr/lib/python3", "/var/lib/dpkg", "/usr/bin", "/usr/lib/x86_64-linux-gnu"}
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	if py, _ := filepath.Glob("/usr/lib/python3.*"); len(py) > 0 {
		dirs = append(dirs, py...)
	}
	args := []string{"-cf", "/dev/null", "--ignore-failed-read"}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			args = append(args, d)
		}
	}
	// tar skips reading file data when the archive is /dev/null; a pipe
	// makes it read.
	cmd := exec.Command("sh", "-c", `tar "$@" 2>/dev/null | cat > /dev/null`, "sh")
	cmd.Args = append(cmd.Args, append([]string{"-cf", "-", "--ignore-failed-read"}, args[3:]...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Logf("warming the page cache: %v\n%s", err, out)
	}
}

var benignCorpus = []benignWorkload{
	{
		// Everyday file tools over whole trees: du stats every file (one
		// newfstatat each, most of its time: its work, not a call it could
		// skip), cp -r copies a gigabyte of libraries (copy_file_range
		// calls of large files run long in the kernel: the work asked for),
		// find walks and matches. Warm, so the walk is the kernel's, not the
		// disk's.
		name:  "du-cp-find",
		tools: []string{"du", "cp", "find", "wc", "rm"},
		prep:  warm(`du -sh /usr/share /usr/lib/x86_64-linux-gnu; tar -cf - /usr/lib/x86_64-linux-gnu 2>/dev/null | cat > /dev/null`),
		script: `du -sh /usr/share /usr/lib/x86_64-linux-gnu && cp -r /usr/lib/x86_64-linux-gnu "$1/libs" && du -sh "$1/libs" && ` +
			`find /usr -name '*.so*' | wc -l && find "$1/libs" -type f -newer "$1/out.log" | wc -l && rm -rf "$1/libs"`,
	},
	{
		// A C build with parallel jobs: make -j2 compiling this
		// repository's test programs with gcc, as many CPUs busy as there
		// are, each job's compiler waiting for a CPU now and then.
		name:  "make-j-gcc",
		tools: []string{"make", "gcc"},
		script: `cd "$1" && for f in "$2"/tests/progs/*.c; do b=$(basename "$f" .c); ` +
			`printf '%s: %s\n\tgcc -O2 -pthread -o $@ $<\n' "$b" "$f"; echo "all: $b" ; done > Makefile && ` +
			`make -j2 -k all && ls | wc -l`,
	},
	{
		// An empty build cache, so the compiler really compiles (the
		// standard library too): three of sysray's packages, whose 80
		// dependencies are the core of the standard library, about 7 s
		// on two CPUs (the four with capture's zstd and symbol's DWARF
		// took 12).
		name:  "go-build",
		tools: []string{"go"},
		script: `cd "$2" && GOCACHE="$3/gocache" GOPROXY=off CGO_ENABLED=0 go build ` +
			`./internal/output ./internal/stat ./internal/filter`,
	},
	{
		// The cache go-build filled: the packages under test and their
		// dependencies are built, their tests and the testing packages are
		// not.
		name:  "go-test",
		tools: []string{"go"},
		script: `cd "$2" && GOCACHE="$3/gocache" GOPROXY=off CGO_ENABLED=0 go test -count=1 ` +
			`./internal/filter ./internal/event`,
	},
	{
		// A Go program at rest, the shape of a server between requests:
		// 32 goroutines on locked OS threads handed a small job every 2 ms,
		// the runtime's idle Ms parked in futex on their own notes, and a
		// pool of 16 C workers parked on a condition variable, one task
		// every 10 ms. Most of their threads' time is futex, none of it a
		// lock handed on (lock-convoy must stay silent).
		name:  "idle-thread-pools",
		tools: []string{"go", "make", "cc"},
		script: `cd "$2" && GOCACHE="$3/gocache" GOPROXY=off CGO_ENABLED=0 go build -o "$1/goidle" ./scenarios/goidle && ` +
			`make -s -C scenarios bin/lockconvoy && "$1/goidle" -threads 32 -every 2ms -d 2s && ` +
			`scenarios/bin/lockconvoy -m idle -t 16 -i 10 -d 2`,
	},
	{
		// A build with parallel jobs: the C programs of the variants suite
		// compiled four at a time.
		name:   "cc-parallel",
		tools:  []string{"cc", "xargs"},
		script: `ls "$2"/scenarios/variants/progs/*.c | xargs -P 4 -I{} sh -c 'cc -O2 -pthread -c "$2" -o "$1/$(basename "$2" .c).o"' sh "$1" {} && ls "$1"/*.o | wc -l`,
	},
	{
		// gpg under a 32 KiB RLIMIT_MEMLOCK without CAP_IPC_LOCK (a
		// container's): its one mlock of 64 KiB for secure memory fails
		// with ENOMEM, it warns "using insecure memory" and goes on, exit 0.
		// A probe handled, not a program stuck on the limit (memlock-limit
		// must stay silent).
		name:  "gpg-insecure-memory",
		tools: []string{"gpg", "prlimit", "setpriv", "od"},
		script: `mkdir -m 700 "$1/gnupg" && prlimit --memlock=32768:32768 setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock ` +
			`gpg --homedir "$1/gnupg" --batch --gen-random 1 16 | od -An -tx1`,
	},
	{
		// A running program replaced the ways that work: install(1)
		// (unlinks, then writes a new file), cp --remove-destination, and
		// a copy beside it renamed over. None opens the running inode for
		// writing, so none is refused with ETXTBSY (text-busy's cousins).
		name:  "replace-running-binary",
		tools: []string{"cp", "install", "mv", "sleep"},
		script: `cp "$(command -v sleep)" "$1/srv" && { "$1/srv" 30 & pid=$!; sleep 0.2; ` +
			`install -m 755 "$(command -v cp)" "$1/srv" && cp --remove-destination "$(command -v mv)" "$1/srv" && ` +
			`cp "$(command -v sleep)" "$1/new" && mv "$1/new" "$1/srv"; st=$?; kill $pid; wait $pid; exit $st; }`,
	},
	{
		// git reading a work tree on a read-only mount (a repository
		// mounted :ro into a container): git status tries to refresh the
		// index under index.lock, is refused with EROFS once a run, and
		// goes on without it (read-only-fs's cousin: a probe it handles).
		name:  "git-read-only-mount",
		tools: []string{"git", "unshare", "mount"},
		script: `cd "$1" && git init -q repo && cd repo && echo a > a && git add a && ` +
			`git -c user.email=t@example.com -c user.name=t commit -qm a && touch a && ` +
			`unshare -m --propagation private sh -c 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && cd "$1" && ` +
			`git status --short && git log --oneline && git diff --stat && git status' sh "$1/repo"`,
	},
	{
		// 64 MiB of shared libraries and other files from /usr/lib,
		// compressed, tested and decompressed by both.
		name:  "xz-gzip",
		tools: []string{"xz", "gzip", "cmp"},
		prep:  makeBigFile,
		script: `cd "$1" && xz -T2 -1 -k big && xz -t big.xz && xz -dc big.xz | cmp - big && ` +
			`gzip -6 -k big && gzip -t big.gz && gzip -dc big.gz | cmp - big && ls -l big*`,
	},
	{
		// head stops reading: find dies of SIGPIPE (an info finding).
		// Ordinary work here means a warm page cache: cold, this VM's disk
		// makes single reads take 300 ms, which the doctor rightly reports
		// as slow-syscall warnings, and whether it is cold depends on what
		// ran before (the sick-host tests fill most of memory).
		name:   "find-sha256sum",
		tools:  []string{"find", "head", "xargs", "sha256sum"},
		prep:   warm(findSha),
		script: findSha,
	},
	{
		name:  "tar",
		tools: []string{"tar", "wc"},
		script: `cd "$1" && tar -C / -cf - usr/share/doc | wc -c && ` +
			`tar -C / -cf doc.tar usr/share/doc && tar -tvf doc.tar | wc -l && ` +
			`mkdir x && tar -C x -xf doc.tar && du -sh x`,
	},
	{
		// CPython's own regression tests, from Debian's
		// libpython3.X-testsuite, on Debian's python3 (not one on PATH).
		name:  "python-testsuite",
		tools: []string{"/usr/bin/python3"},
		check: []string{"/usr/bin/python3", "-c", "import test.support, test.test_json, test.test_tarfile"},
		script: `cd "$1" && /usr/bin/python3 -m test test_json test_csv test_difflib test_re ` +
			`test_tempfile test_shutil test_glob test_zlib test_collections test_pathlib test_tarfile test_gzip`,
	},
	{
		name:  "git",
		tools: []string{"git", "seq"},
		script: `set -e
export GIT_CONFIG_NOSYSTEM=1 HOME="$1" GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.com
git init -q -b main "$1/r"
cd "$1/r"
i=0
while [ $i -lt 30 ]; do
	seq $i 5000 > f$((i % 7)).txt
	git add -A
	git commit -q -m "commit $i"
	i=$((i+1))
done
git gc -q
git clone -q "$1/r" "$1/r2"
git -C "$1/r2" log --oneline | wc -l
git clone -q --no-local "$2" "$1/c"
git -C "$1/c" log --stat --oneline | wc -l
git -C "$1/c" fsck --no-progress
git -C "$1/c" status --short | wc -l
git -C "$1/c" log -p -n 20 | wc -c`,
	},
	{
		// The server and the benchmark both under the doctor; the server
		// stops on SHUTDOWN and exits 0.
		name:  "redis",
		tools: []string{"redis-server", "redis-cli", "redis-benchmark"},
		prep:  freePort,
		script: `set -e
port=$4
redis-server --port $port --bind 127.0.0.1 --save '' --appendonly no --dir "$1" --logfile "$1/redis.log" &
srv=$!
i=0
until redis-cli -p $port ping > /dev/null 2>&1; do
	i=$((i+1)); [ $i -lt 100 ] || exit 1; sleep 0.1
done
redis-benchmark -p $port -n 20000 -q -t set,get,incr,lpush,lpop,hset,mset
redis-benchmark -p $port -n 20000 -P 16 -q -t set,get
redis-cli -p $port dbsize
redis-cli -p $port shutdown nosave || true
wait $srv`,
	},
	{
		// A static file server and its clients on loopback: python's
		// http.server (HTTP/1.0: a connection a request, closed after
		// the response), curl fetching files one process each and 50 in
		// one process, wget mirroring the tree. Every connect is
		// answered at once; no response waits on the network.
		name:  "http-loopback",
		tools: []string{"python3", "curl", "wget"},
		prep:  freePort,
		script: `set -e
port=$4
mkdir -p "$1/www/d"
for i in $(seq 1 50); do head -c $((i*1000)) /dev/urandom > "$1/www/d/f$i"; done
cd "$1/www"
python3 -m http.server --bind 127.0.0.1 $port > "$1/http.log" 2>&1 &
srv=$!
i=0
until curl -sf -o /dev/null http://127.0.0.1:$port/; do
	i=$((i+1)); [ $i -lt 100 ] || exit 1; sleep 0.1
done
for i in $(seq 1 50); do curl -sf -o /dev/null http://127.0.0.1:$port/d/f$i; done
curl -sf $(for i in $(seq 1 50); do printf ' -o /dev/null http://127.0.0.1:%s/d/f%s' $port $i; done)
wget -q -r -np -P "$1/mirror" http://127.0.0.1:$port/d/
test $(ls "$1/mirror/127.0.0.1:$port/d" | wc -l) -ge 50
kill $srv
wait $srv || true`,
	},
	{
		// A name server that answers (dnsmasq) and the programs that ask
		// it, in network and mount namespaces of their own (127.0.0.1:53
		// and resolv.conf are theirs): getent and python's getaddrinfo
		// (glibc's resolver, A and AAAA: the A found, no AAAA record),
		// names fully qualified, a short name found at its first search
		// domain, and one name that does not exist, asked once.
		name:  "dns-dnsmasq",
		tools: []string{"dnsmasq", "unshare", "ip", "getent", "python3"},
		script: `set -e
printf 'nameserver 127.0.0.1\nsearch corp.test\n' > "$1/resolv.conf"
printf 'hosts: files dns\n' > "$1/nsswitch.conf"
exec unshare -n -m sh -ec '
ip link set lo up
mount --make-rprivate /
mount --bind "$1/resolv.conf" /etc/resolv.conf
mount --bind "$1/nsswitch.conf" /etc/nsswitch.conf
dnsmasq --keep-in-foreground --no-resolv --no-hosts --listen-address=127.0.0.1 --bind-interfaces --user=root \
	--address=/sysray.test/10.0.0.1 --address=/corp.test/10.0.0.2 --address=/invalid/ --pid-file="$1/dnsmasq.pid" --log-facility="$1/dnsmasq.log" &
srv=$!
i=0
until getent hosts up.sysray.test > /dev/null; do
	i=$((i+1)); [ $i -lt 100 ] || exit 1; sleep 0.1
done
for i in $(seq 1 100); do getent ahosts svc$i.sysray.test > /dev/null; done
for i in $(seq 1 20); do getent hosts db > /dev/null; done
python3 -c "
import socket
for i in range(300):
    socket.getaddrinfo(\"api%d.sysray.test\" % (i % 30), 80)
"
! getent hosts gone.invalid.
kill $srv
wait $srv || true
' sh "$1"`,
	},
	{
		// Inserts in one transaction, then one transaction (and fsync)
		// each, in rollback-journal and WAL databases.
		name:  "sqlite3",
		tools: []string{"sqlite3", "seq", "sed"},
		script: `set -e
cd "$1"
for mode in delete wal; do
	{
		echo "PRAGMA journal_mode=$mode; CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, n INTEGER); BEGIN;"
		seq 5000 | sed "s/.*/INSERT INTO t(name, n) VALUES ('row&', &);/"
		echo "COMMIT;"
	} | sqlite3 $mode.db
	{
		seq 500 | sed "s/.*/INSERT INTO t(name, n) VALUES ('auto&', &);/"
		echo "CREATE INDEX t_n ON t(n); UPDATE t SET n = n + 1 WHERE id % 7 = 0; DELETE FROM t WHERE id % 11 = 0;"
		echo "SELECT count(*), sum(n) FROM t; VACUUM; PRAGMA integrity_check;"
	} | sqlite3 $mode.db
done`,
	},
	{
		// Read-only package queries against the local database and
		// cache; apt-get only simulates (-s), which takes no lock and
		// downloads nothing.
		name:  "dpkg-apt",
		tools: []string{"dpkg", "dpkg-query", "apt-cache", "apt-get"},
		script: `set -e
n=0
for p in $(dpkg-query -W -f '${Package}\n'); do
	dpkg -L "$p" > /dev/null
	n=$((n+1))
	[ $n -lt 400 ] || break
done
echo "$n packages listed"
dpkg -S /usr/bin/sha256sum
dpkg --verify coreutils dpkg
apt-cache policy bash coreutils dpkg > /dev/null
apt-cache show dpkg > /dev/null
apt-cache depends --recurse --no-recommends --no-suggests dpkg | wc -l
apt-cache search --names-only '^lib.*-dev$' | wc -l
apt-cache stats
apt-get -s install --reinstall gzip > /dev/null`,
	},
}

// Real work that nobody in this project wrote yields nothing at warning or
// above. Every info finding is logged, for a person to judge.
func TestBenignCorpus(t *testing.T) {
	requireBPF(t)
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	shared := t.TempDir()
	warmCache(t)
	for _, w := range benignCorpus {
		t.Run(w.name, func(t *testing.T) {
			haveTools(t, w)
			dir := t.TempDir()
			args := []string{"sh", "-c", `exec > "$1/out.log" 2>&1` + "\n" + w.script, "sh", dir, repo, shared}
			if w.prep != nil {
				args = append(args, w.prep(t, dir)...)
			}
			start := time.Now()
			rep := doctorCmd(t, 0, args...)
			took := time.Since(start)
			if t.Failed() {
				out, _ := os.ReadFile(filepath.Join(dir, "out.log"))
				t.Logf("workload output (tail):\n%s", tail(string(out), 3000))
			}
			t.Logf("%s: %v, %d findings, %d events dropped", w.name, took.Round(time.Millisecond), len(rep.Findings), rep.Drops)
			for _, f := range rep.Findings {
				if hostDiscard(f) {
					// True of this host, whatever runs on it: / is
					// mounted with discard, and a deletion's share of
					// time waiting for it grows with the device's
					// load (rm -rf of the copied libraries: 43% on a
					// busy CI host). A finding about the host, with the
					// host's fix, not a false alarm about the program.
					t.Logf("%s %s, of the host's discard mount: %s", f.Severity, f.ID, f.Title)
					continue
				}
				if f.Severity == "info" {
					ev, _ := json.Marshal(f.Evidence)
					t.Logf("info %s: %s\n\t%s\n\tevidence: %s", f.ID, f.Title, f.Summary, clip(string(ev), 1500))
					continue
				}
				b, _ := json.MarshalIndent(f, "\t", "  ")
				t.Errorf("%s %s on ordinary work: %s\n\t%s", f.Severity, f.ID, f.Title, b)
			}
		})
	}
}

// hostDiscard reports a blocked-in-kernel-io finding of calls that waited
// for discards on a mount the host mounted with `discard`.
func hostDiscard(f finding) bool {
	if f.ID != "blocked-in-kernel-io" || f.Evidence["cause"] != "discard" {
		return false
	}
	m, _ := f.Evidence["mount"].(map[string]any)
	opts, _ := m["options"].(string)
	return slices.Contains(strings.Split(opts, ","), "discard")
}

// haveTools skips a workload whose tools are missing, or fails it when CI
// (SYSRAY_REQUIRE_BPF=1, .ci/run installs them) must run it.
func haveTools(t *testing.T, w benignWorkload) {
	t.Helper()
	var missing []string
	for _, tool := range w.tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 && w.check != nil {
		if out, err := exec.Command(w.check[0], w.check[1:]...).CombinedOutput(); err != nil {
			missing = append(missing, strings.Join(w.check, " ")+": "+strings.TrimSpace(tail(string(out), 300)))
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("SYSRAY_REQUIRE_BPF") == "1" {
		t.Fatalf("%s cannot run, missing %s (.ci/run installs it)", w.name, strings.Join(missing, ", "))
	}
	t.Skipf("%s: missing %s", w.name, strings.Join(missing, ", "))
}

// makeBigFile writes dir/big: 64 MiB of the files under /usr/lib (libraries,
// Python modules, locale data), topped up with random bytes if short.
func makeBigFile(t *testing.T, dir string) []string {
	t.Helper()
	const size = 64 << 20
	out, err := os.Create(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var n int64
	filepath.WalkDir("/usr/lib", func(path string, d fs.DirEntry, err error) error {
		if n >= size {
			return filepath.SkipAll
		}
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer f.Close()
		m, _ := io.Copy(out, io.LimitReader(f, size-n))
		n += m
		return nil
	})
	if n < size {
		if _, err := io.CopyN(out, rand.Reader, size-n); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return nil
}

// freePort returns a TCP port on 127.0.0.1 nobody listens on (as $4).
func freePort(t *testing.T, dir string) []string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return []string{strconv.Itoa(port)}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
