#!/bin/sh
# Generates the gRPC stubs of proto/cowkv/v1 (run by `go generate ./...`
# from clients/go). The plugins are the versions pinned as tools in go.mod;
# protoc is Debian's (override with $PROTOC). The *.pb.go files are
# committed so that the module builds from a module cache or a plain
# `go get`; generated_test.go regenerates them into a temporary directory
# and fails if they differ.
#   sh gen.sh [OUTDIR]   # default: this directory (its *.pb.go are replaced)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
out=${1:-$here}
protoc=${PROTOC:-/usr/bin/protoc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$here/../.."
go build -o "$tmp/bin/" google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc
maps=""
for f in "$root"/proto/cowkv/v1/*.proto; do
  rel=cowkv/v1/$(basename "$f")
  maps="$maps,M$rel=cowkv.dev/cowkv/internal/pb"
done
maps=${maps#,}
mkdir "$tmp/gen"
"$protoc" -I "$root/proto" \
  --plugin=protoc-gen-go="$tmp/bin/protoc-gen-go" --plugin=protoc-gen-go-grpc="$tmp/bin/protoc-gen-go-grpc" \
  --go_out="$tmp/gen" --go_opt=paths=source_relative --go_opt="$maps" \
  --go-grpc_out="$tmp/gen" --go-grpc_opt=paths=source_relative --go-grpc_opt="$maps" \
  "$root"/proto/cowkv/v1/*.proto
# paths=source_relative writes into cowkv/v1/: flatten. No stale stub of a
# removed .proto survives.
rm -f "$out"/*.pb.go
mv "$tmp"/gen/cowkv/v1/*.go "$out"/
