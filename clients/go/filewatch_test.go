package cowkv_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"cowkv.dev/cowkv"
)

func TestWatchFiles(t *testing.T) {
	bin := serverBinary(t)
	srv := startServer(t, bin, t.TempDir(), "128M", "")
	defer srv.stop()
	ctx := context.Background()
	db, err := cowkv.Dial(ctx, srv.addr, cowkv.WithDefaultTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.CreateSubvolume(ctx, "fw"); err != nil {
		t.Fatal(err)
	}
	sv := db.Subvolume("fw")
	t.Run("events", func(t *testing.T) { testFileWatchEvents(t, sv) })
	t.Run("refused", func(t *testing.T) {
		if _, err := db.Snapshot(ctx, "fw", "fw-ro", true); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Subvolume("fw-ro").WatchFiles(ctx, ""); !errors.Is(err, cowkv.ErrFailedPrecondition) {
			t.Errorf("read-only snapshot: %v, want ErrFailedPrecondition", err)
		}
		if _, err := db.Subvolume("no-such").WatchFiles(ctx, ""); !errors.Is(err, cowkv.ErrNotFound) {
			t.Errorf("unknown subvolume: %v, want ErrNotFound", err)
		}
		if _, err := sv.WatchFiles(ctx, "", cowkv.WatchPrevKV()); !errors.Is(err, cowkv.ErrInvalidArgument) {
			t.Errorf("prev_kv: %v, want ErrInvalidArgument", err)
		}
	})
}

func takeFiles(t *testing.T, w *cowkv.FileWatcher, n int) ([]cowkv.FileEvent, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []cowkv.FileEvent
	s := ""
	var last uint64
	for i := 0; i < n; i++ {
		ev, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("after %d events (%s): %v", i, s, err)
		}
		if ev.Revision <= last {
			t.Errorf("revision %d after %d", ev.Revision, last)
		}
		last = ev.Revision
		out = append(out, ev)
		s += fmt.Sprintf("%v %s>%s; ", ev.Type, ev.Path, ev.NewPath)
	}
	return out, s
}

// testFileWatchEvents: create, write, rename, unlink under a prefix come in
// order with rising revisions; changes outside it are not shown; a KV
// watcher on the same stream sees only its keys; a start revision replays.
func testFileWatchEvents(t *testing.T, sv *cowkv.Subvolume) {
	ctx := context.Background()
	// A KV write first: a KV watcher created on a subvolume with no KV
	// history yet ends COMPACTED once file events took the next revisions
	// (a server issue, reported; not what this test is about).
	if _, err := sv.Put(ctx, []byte("k0"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Mkdir(ctx, "d", 0); err != nil {
		t.Fatal(err)
	}
	w, err := sv.WatchFiles(ctx, "d/")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	kw, err := sv.Watch(ctx, []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	defer kw.Close()
	steps := []func() error{
		func() error { _, err := sv.CreateFile(ctx, "d/a", 0); return err },
		func() error { _, err := sv.CreateFile(ctx, "outside", 0); return err },
		func() error { _, _, err := sv.WriteFile(ctx, "d/a", []byte("hello")); return err },
		func() error { _, err := sv.Put(ctx, []byte("k"), []byte("v")); return err },
		func() error { return sv.Rename(ctx, "d/a", "d/b", 0) },
		func() error { return sv.Unlink(ctx, "d/b") },
	}
	for i, f := range steps {
		if err := f(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	want := "CREATE d/a>; MODIFY d/a>; RENAME d/a>d/b; UNLINK d/b>; "
	evs, got := takeFiles(t, w, 4)
	if got != want {
		t.Errorf("events: %s, want %s", got, want)
	}
	kev := take(t, kw, 1)
	if string(kev[0].KV.Key) != "k" {
		t.Errorf("KV watcher got %v", kev)
	}
	// Replay from the first event's revision: the same four, same revisions.
	w2, err := sv.WatchFiles(ctx, "d", cowkv.WatchFromRevision(evs[0].Revision))
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	evs2, got2 := takeFiles(t, w2, 4)
	if got2 != want || evs2[3].Revision != evs[3].Revision || evs2[0].Ino != evs[0].Ino {
		t.Errorf("replay: %s %v, want %s %v", got2, evs2, want, evs)
	}
	w.Close()
	if _, err := w.Next(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("after Close: %v, want io.EOF", err)
	}
}
