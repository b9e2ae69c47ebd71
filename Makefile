# sysray build. `make test` and `make demo` are the README's two commands.
GO ?= go
BPF_CLANG ?= $(shell command -v clang-19 || command -v clang)
BPF_CFLAGS ?= -O2 -g -Wall -Werror -mcpu=v3
export BPF_CLANG BPF_CFLAGS

.PHONY: all build generate test unit integration lint demo bench clean check-generated

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/sysray ./cmd/sysray

generate:
	cd internal/probe && $(GO) generate ./...

# Fails when the committed BPF objects do not match bpf/*.c.
check-generated: generate
	git diff --exit-code -- internal/probe

lint:
	test -z "$$(gofmt -l $$(git ls-files '*.go'))"
	$(GO) vet ./...

test: build lint
	$(GO) test ./...

clean:
	rm -rf bin
