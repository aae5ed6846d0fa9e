// Package pb holds the gRPC stubs generated from proto/cowkv/v1 by gen.sh
// (`go generate ./...` in clients/go). The generated files are not committed.
package pb

//go:generate sh ./gen.sh
