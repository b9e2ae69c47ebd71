# sysray build. `make test` and `make demo` are the README's two commands.
GO ?= go
# bash: recipes use pipefail.
SHELL := /bin/bash
BPF_CLANG ?= $(shell command -v clang-19 || command -v clang)
BPF_CFLAGS ?= -O2 -g -Wall -Werror -mcpu=v3
export BPF_CLANG BPF_CFLAGS

.PHONY: all build dist deps generate test unit test-long soak sick deep stories variants-long lint demo bench clean check-generated
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# The release a build says it is (sysray --version): the nearest tag, or
# the commit when there is none.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -ldflags "-X github.com/sysray/sysray/internal/version.Version=$(VERSION)" -o bin/sysray ./cmd/sysray

# A release: the static binary named for its version and platform, and its
# SHA-256 checksum beside it (sha256sum -c checks it), in dist/.
DIST = sysray-$(VERSION)-linux-$(shell $(GO) env GOARCH)
dist:
	mkdir -p dist
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -ldflags "-X github.com/sysray/sysray/internal/version.Version=$(VERSION)" -o dist/$(DIST) ./cmd/sysray
	cd dist && sha256sum $(DIST) > $(DIST).sha256
	@echo "dist/$(DIST) and dist/$(DIST).sha256"

generate:
	cd internal/probe && $(GO) generate ./...

# Fails when the committed BPF objects do not match bpf/*.c.
check-generated: generate
	git diff --exit-code -- internal/probe

lint:
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt: $$bad"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd tests/otlp && $(GO) vet ./...

# What the tests need that a fresh Debian 12 machine lacks (root installs it).
deps:
	bash scripts/deps.sh

# Each run's tests go through scripts/testsum: failures with their output,
# every skip with its reason, the counts and the slowest tests (TESTTIMES=FILE
# appends every test's time to FILE, to plan the tiers from). Where the
# live tests must run (SYSRAY_REQUIRE_BPF=1, as CI sets), a skip fails.
TESTSUM = bin/testsum $(if $(filter 1,$(SYSRAY_REQUIRE_BPF)),-skips-fail) $(if $(TESTTIMES),-times $(abspath $(TESTTIMES)))

# Tests that belong to the long tier (make test-long) only: the agent's
# ten-minute soak (make soak), and sysray on a host in trouble of its own
# (make sick: the CPUs saturated, memory filled, the audit backlog full),
# which takes minutes of setting the host up and checks that sysray holds
# there, not that the doctor finds the trouble (the stories' variants in
# make test do).
SOAK_TESTS = TestAgentSoak
SICK_TESTS = TestSick[A-Za-z]*
# (make deep) The measurements that go deeper than make test's checks of
# the same code: the doctor's memory bound under an exec storm, stat's
# percentiles against a record of the same run, the thrash reader's counts
# against the kernel's, and a whole host's record against strace (make
# test checks a command's); each takes 13-18 s.
DEEP_TESTS = TestDoctorExecStormMemory|TestStatBudgetAgainstRecord|TestThrashReadGroundTruth|TestHostRecordMatchesStrace
# (make stories) The bundled incidents' stories (sysray demo NAME) with
# their evidence checked against each scenario's own count of what it did:
# deeper than the finding each detector's main variant in make test
# checks, about 90 s in all. The four seeds' stories (the legacy vsyscall,
# posix_fadvise, the audit backlog, MAP_32BIT) stay in make test: sysray
# must find those on every run. A new story runs in make test until it is
# named here.
STORY_TESTS = TestStory(AddrInUse|CPUWait|Compaction|FDLeak|Hotcall|Inotify|LockConvoy|MapCount|Memcg|Memlock|MmapLock|NXDomain|Nagle|Ports|ROFS|Refused|Resolver|ResolverGo|ResolverTCP|SynLoss|TextBusy|Thrash|ThrashRead|Writeback)
LONG_TESTS = ^($(SOAK_TESTS)|$(SICK_TESTS)|$(DEEP_TESTS)|$(STORY_TESTS))$$

# The packages' own tests run two packages at a time, as make unit's do;
# the live suite (tests/...) one package at a time, and within it one test
# at a time but those that call alongside(t) (docs/testing.md), four at once.
# Lint and the packages' tests run before the live suite, not beside it:
# beside it they made it slower by as much as they saved (from fresh
# clones, one after the other: the tests package 8m58s beside them
# against 8m17s after them, make test 614 s against 604 s), and the live
# suite's picture of the host before it (tests/hoststate_test.go) would
# catch their cgroups coming and going.
test: deps build lint bin/testsum
	set -o pipefail; $(GO) test -count=1 -timeout 20m -json $(UNIT_PKGS) | $(TESTSUM)
	set -o pipefail; $(GO) test -count=1 -p 1 -parallel 4 -timeout 60m -json -skip '$(LONG_TESTS)' ./tests/... | $(TESTSUM)
	set -o pipefail; cd deploy/check && $(GO) test -count=1 -json ./... | ../../$(TESTSUM)
	set -o pipefail; cd tests/otlp && $(GO) test -count=1 -json ./... | ../../$(TESTSUM)

bin/testsum: scripts/testsum/main.go
	$(GO) build -o $@ ./scripts/testsum

# The packages' own tests, without root and without the live suite in tests/:
# what a change to a library needs before it is pushed.
UNIT_PKGS = $$($(GO) list ./... | grep -v '^github.com/sysray/sysray/tests')
unit: bin/testsum
	set -o pipefail; $(GO) test -count=1 -json $(UNIT_PKGS) | $(TESTSUM)

# Every parser of outside input (captures, filters, strace logs, scap files, kallsyms,
# ELF files, perf maps, /proc and cgroup files, container metadata) fed
# FUZZTIME of generated input each; not part of `make test`.
FUZZTIME ?= 30s
FUZZ_TARGETS = \
	internal/capture:FuzzReader \
	internal/filter:FuzzParse \
	internal/strace:FuzzConvert internal/scap:FuzzRead \
	internal/symbol:FuzzKallsyms internal/symbol:FuzzELF internal/symbol:FuzzMaps internal/symbol:FuzzPerfMap \
	internal/proc:FuzzParseStat internal/proc:FuzzSplitNul \
	internal/container:FuzzParseCgroupFile internal/container:FuzzDockerInspect internal/container:FuzzLibcFiles

# The long tier: the soak, the sick host, every variant shape, each parser
# fuzzed, and sysray's cost against its peers (strace, perf, bpftrace) in
# one interleaved run of PEER_ROUNDS rounds (bench/peers.sh prints the
# table BENCHMARKS.md keeps).
PEER_ROUNDS ?= 3
test-long: soak sick deep stories variants-long
	FUZZTIME=$(FUZZTIME) bash scripts/test-long.sh $(FUZZ_TARGETS)
	bash bench/peers.sh $(PEER_ROUNDS)

# The long tier's live tests (LONG_TESTS), which CI runs after make test.
# $(call live-tier,REGEX) runs the live tests whose names match REGEX.
live-tier = set -o pipefail; $(GO) test -count=1 -p 1 -timeout 30m -json -run '^($(1))$$' ./tests | $(TESTSUM)

soak: build bin/testsum
	$(call live-tier,$(SOAK_TESTS))

sick: build bin/testsum
	$(call live-tier,$(SICK_TESTS))

deep: build bin/testsum
	$(call live-tier,$(DEEP_TESTS))

stories: build bin/testsum
	$(call live-tier,$(STORY_TESTS))

# Every variant but each detector's main one (make test runs those): the
# long tier's shapes of each mechanism, which CI runs after make test.
variants-long: build bin/testsum
	set -o pipefail; SYSRAY_VARIANTS=rest $(GO) test -count=1 -p 1 -timeout 40m -json -run '^TestVariants$$' ./tests | $(TESTSUM)

# The main job: every bundled incident (scenarios/) reproduced live and
# diagnosed by the doctor.
demo: build
	./bin/sysray demo all

# The current tables in BENCHMARKS.md: syscall overhead and sampling, redis,
# record's own CPU, the agent's own CPU, the accuracy of stat's percentiles,
# the doctor against stat.
bench: build
	bash bench/peers.sh
	bash bench/redis.sh
	bash bench/recordcpu.sh
	bash bench/agentcpu.sh
	bash bench/accuracy.sh
	bash bench/doctor-vs-stat.sh

clean:
	rm -rf bin dist
