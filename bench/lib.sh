# Shared by the bench scripts.

# median reads numbers, one per word, and prints their median.
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{if (NR%2) print a[(NR+1)/2]; else printf "%.1f\n", (a[NR/2]+a[NR/2+1])/2}'; }

# start_redis starts a throwaway redis-server on 127.0.0.1:$1, its files in
# a new directory $work; both go when the script exits.
start_redis() {
	work=$(mktemp -d)
	redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --pidfile "$work/redis.pid" --logfile "$work/redis.log"
	trap stop_redis EXIT
	sleep 0.5
}

# stop_redis stops the server start_redis started and removes $work. The
# server writes its log as it shuts down: it is waited for before the rm.
stop_redis() {
	local p
	if p=$(cat "$work/redis.pid" 2>/dev/null) && kill "$p" 2>/dev/null; then
		while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
	fi
	rm -rf "$work"
}

# need_redis installs redis-server and redis-benchmark when either is missing.
need_redis() {
	if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
	fi
}

# sysray_bins sets bins to the sysray binaries named ($@), or else to this
# checkout's (built now) and $PREV/sysray when PREV is set.
sysray_bins() {
	bins=("$@")
	if [ ${#bins[@]} -eq 0 ]; then
		make -s build
		bins=("$PWD/bin/sysray")
		[ -n "${PREV:-}" ] && bins+=("$PREV/sysray")
	fi
	return 0
}
