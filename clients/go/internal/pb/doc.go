// Package pb holds the gRPC stubs generated from proto/cowkv/v1 by gen.sh
// (`go generate ./...` in clients/go). The generated files are committed
// (the module must build from a module cache, where proto/ is absent);
// TestGeneratedCodeIsUpToDate fails when they differ from what gen.sh makes.
package pb

//go:generate sh ./gen.sh
