#!/usr/bin/env bash
# Installs what `make test` needs on a fresh Debian 12 machine: the one list,
# used by `make test` (through `make deps`) and by .ci/run. Quick and silent
# when everything is there; as a user other than root it names what is
# missing and fails, since the live tests need root anyway.
set -euo pipefail

need=()
want() { # want CHECK PACKAGE...: the packages when CHECK fails
	local check=$1
	shift
	eval "$check" >/dev/null 2>&1 || need+=("$@")
}
# want_lean CHECK PACKAGE...: the same, installed without their recommended
# packages (sysdig recommends sysdig-dkms, which would build a kernel module).
lean=()
want_lean() {
	local check=$1
	shift
	eval "$check" >/dev/null 2>&1 || lean+=("$@")
}

# The committed BPF objects are checked against bpf/*.c (make check-generated).
want 'command -v clang-19' clang-19 llvm-19
want '[ -f /usr/include/bpf/bpf_helpers.h ]' libbpf-dev
# Static C workloads (scenarios/, tests/progs) and internal/symbol's C++ and
# Rust test programs (Debian 12's rustc, 1.63, is too old for them: rustc-web).
want '[ -f /usr/lib/x86_64-linux-gnu/libc.a ]' libc6-dev
want 'command -v g++' g++
want 'command -v musl-gcc' musl-tools               # scenarios/bin/resolver-musl: musl's stub resolver
want 'command -v rustc' rustc-web
# Peers the tests compare against or drive.
want 'command -v strace' strace                     # tests/import_test.go, bench
want_lean 'command -v sysdig' sysdig                # tests/importscap_test.go, exportscap_test.go: sysdig's own reading of scap files
want_lean 'command -v tshark' tshark                # tests/importscap_test.go: Wireshark's reading of their blocks
want 'command -v tmux' tmux                         # tests/top_test.go: the TUI in a real terminal
want 'command -v curl' curl                         # tests/agentweb_test.go: the agent over TLS
want 'command -v wget' wget                         # tests/benign_test.go: http-loopback mirrors a tree
want 'command -v ip' iproute2                       # network namespaces and veth pairs
want 'command -v nft' nftables                      # network scenarios' drop rules
want 'command -v chromium' chromium                 # tests/report_test.go renders reports
want 'command -v prometheus' prometheus             # tests/agent_test.go: a real Prometheus scrapes the agent; its promtool checks deploy/prometheus
want 'command -v containerd && command -v ctr' containerd # tests/containers, the agent's container tests
want 'command -v runc' runc
want 'dpkg -s busybox-static' busybox-static        # the test image's rootfs (tests/containers/setup.sh)
# The benign corpus (tests/benign_test.go): real workloads under the doctor.
want 'command -v git' git
want 'command -v xz' xz-utils
want 'command -v sqlite3' sqlite3
want 'command -v redis-server' redis-server
want 'command -v redis-benchmark' redis-tools
want 'command -v dnsmasq' dnsmasq-base              # dns-dnsmasq: a name server that answers
want '/usr/bin/python3 -c "import test.test_json"' python3 libpython3.11-testsuite

missing_helm=
command -v helm >/dev/null || missing_helm=1 # deploy/check renders the chart

if [ ${#need[@]} -eq 0 ] && [ ${#lean[@]} -eq 0 ] && [ -z "$missing_helm" ]; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "scripts/deps.sh: missing ${need[*]} ${lean[*]}${missing_helm:+ helm}; run as root (make deps) to install" >&2
	exit 1
fi
# helm is built from source, the longest install: it builds while apt
# downloads and unpacks, not after. In a fresh Debian 12 chroot on 2 CPUs
# this script then took 2m24s, and helm was done before apt.
helm_pid=
if [ -n "$missing_helm" ]; then
	echo "scripts/deps.sh: building helm" >&2
	GOBIN=/usr/local/bin go install helm.sh/helm/v3/cmd/helm@v3.19.5 &
	helm_pid=$!
fi
if [ ${#need[@]} -gt 0 ] || [ ${#lean[@]} -gt 0 ]; then
	echo "scripts/deps.sh: installing ${need[*]} ${lean[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	if [ ${#need[@]} -gt 0 ]; then
		apt-get install -y -qq "${need[@]}" >/dev/null
	fi
	if [ ${#lean[@]} -gt 0 ]; then
		apt-get install -y -qq --no-install-recommends "${lean[@]}" >/dev/null
	fi
fi
if [ -n "$helm_pid" ] && ! wait "$helm_pid"; then
	echo "scripts/deps.sh: building helm failed" >&2
	exit 1
fi
