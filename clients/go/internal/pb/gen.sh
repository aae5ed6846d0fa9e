#!/bin/sh
# Generates the gRPC stubs of proto/cowkv/v1 into this directory (run by
# `go generate ./...` from clients/go). The plugins are the versions pinned
# as tools in go.mod; protoc is Debian's (override with $PROTOC).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
protoc=${PROTOC:-/usr/bin/protoc}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
cd "$here/../.."
go build -o "$bin/" google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc
maps=""
for f in "$root"/proto/cowkv/v1/*.proto; do
  rel=cowkv/v1/$(basename "$f")
  maps="$maps,M$rel=cowkv.dev/cowkv/internal/pb"
done
maps=${maps#,}
rm -f "$here"/*.pb.go
"$protoc" -I "$root/proto" \
  --plugin=protoc-gen-go="$bin/protoc-gen-go" --plugin=protoc-gen-go-grpc="$bin/protoc-gen-go-grpc" \
  --go_out="$here" --go_opt=paths=source_relative --go_opt="$maps" \
  --go-grpc_out="$here" --go-grpc_opt=paths=source_relative --go-grpc_opt="$maps" \
  "$root"/proto/cowkv/v1/*.proto
# paths=source_relative writes into cowkv/v1/: flatten.
mv "$here"/cowkv/v1/*.go "$here"/ && rm -rf "$here/cowkv"
