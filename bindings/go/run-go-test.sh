#!/bin/sh
# SPDX-License-Identifier: MIT
# Suite 'go': `go test` of the Go binding against this build's library (meson passes the source
# and build roots). Skips (exit 77) when Go is not installed (Debian's golang-go;
# scripts/install-deps installs it). Offline: GOPROXY=off, no module outside the standard
# library; the build cache lives in the build tree.
set -eu
src=$1
build=$2
if ! command -v go >/dev/null 2>&1; then
	echo "SKIP: go is not installed (Debian's golang-go; scripts/install-deps installs it)"
	exit 77
fi
export CGO_ENABLED=1
export CGO_CFLAGS="-I$src/include -I$build/include"
export CGO_LDFLAGS="-L$build/src -Wl,-rpath,$build/src"
export GOCACHE="$build/bindings/go/cache" GOPATH="$build/bindings/go/gopath"
export GOPROXY=off GOFLAGS=-mod=mod GOTOOLCHAIN=local
cd "$src/bindings/go"
go vet ./...
exec go test -count=1 ./...
