package cowkv_test

// Error classes against a live cowkvd ($COWKVD or ../../bazel-bin/server/cowkvd):
// the server sends google.rpc.ErrorInfo with every error, and the client's
// kind, Reason and Errno come from it (unit_test.go covers the fallback for
// a server that sends none).

import (
	"context"
	"errors"
	"testing"

	"cowkv.dev/cowkv"
)

func TestErrorInfoLive(t *testing.T) {
	srv := startServer(t, serverBinary(t), t.TempDir(), "64M", "")
	defer srv.stop()
	ctx := context.Background()
	db, err := cowkv.Dial(ctx, srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.CreateSubvolume(ctx, "e"); err != nil {
		t.Fatal(err)
	}
	sv := db.Subvolume("e")
	if _, err := db.Snapshot(ctx, "e", "e@ro", true); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error, kind error, reason, errno string) {
		t.Helper()
		var ce *cowkv.Error
		if !errors.As(err, &ce) || ce.Kind() != kind || ce.Reason != reason || ce.Errno != errno {
			t.Errorf("%s: %+v, want %v reason %q errno %q", what, ce, kind, reason, errno)
		}
	}
	_, err = db.Subvolume("e@ro").Put(ctx, []byte("k"), []byte("v"))
	check("put to a snapshot", err, cowkv.ErrReadOnly, "READ_ONLY_SNAPSHOT", "")
	_, err = db.Subvolume("e@ro").Mkdir(ctx, "/d", 0o755)
	check("mkdir in a snapshot", err, cowkv.ErrReadOnly, "READ_ONLY_SNAPSHOT", "EROFS")
	if _, err := sv.Mkdir(ctx, "/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.CreateFile(ctx, "/d/f", 0o644); err != nil {
		t.Fatal(err)
	}
	check("rmdir non-empty", sv.Rmdir(ctx, "/d"), cowkv.ErrFailedPrecondition, "ENOTEMPTY", "ENOTEMPTY")
	_, err = sv.Stat(ctx, "/none")
	check("stat absent", err, cowkv.ErrNotFound, "ENOENT", "ENOENT")
	_, err = db.CreateSubvolume(ctx, "e")
	check("create taken", err, cowkv.ErrAlreadyExists, "ALREADY_EXISTS", "")
}
