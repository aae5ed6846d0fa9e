package cowkv_test

// Watch against a live cowkvd ($COWKVD or ../../bazel-bin/server/cowkvd).
//
// Goal: Subvolume.Watch does what docs/api.md "Watch" says through this
// client: events of puts, deletes and txns in revision order with prev_kv,
// prefixes and ranges, a replay from an older revision, filters, Close and
// ctx ending the iteration cleanly, typed ends (ErrCompacted with the
// compact revision, ErrSubvolumeDeleted), a fragmented revision joined, and
// refused creates. Method: direct cases, and a seeded random walk of puts,
// deletes and txns on a few keys whose watcher's events must equal the
// model's change list. Replay: COWKV_WATCH_SEED=N go test -run TestWatch/model.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"cowkv.dev/cowkv"
)

func TestWatchClientChecks(t *testing.T) {
	db, err := cowkv.Dial(context.Background(), deadAddress(t)) // never contacted
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sv, ctx := db.Subvolume(""), context.Background()
	for name, call := range map[string]func() error{
		"empty key": func() error { _, err := sv.Watch(ctx, nil); return err },
		"long key":  func() error { _, err := sv.Watch(ctx, bytes.Repeat([]byte("k"), 1025)); return err },
		"prefix and range": func() error {
			_, err := sv.Watch(ctx, []byte("a"), cowkv.WatchPrefix(), cowkv.WatchRange([]byte("b")))
			return err
		},
	} {
		if !errors.Is(call(), cowkv.ErrInvalidArgument) {
			t.Errorf("%s: want ErrInvalidArgument", name)
		}
	}
	if _, err := cowkv.Dial(ctx, deadAddress(t), cowkv.WithWatchQueueBytes(0)); !errors.Is(err, cowkv.ErrInvalidArgument) {
		t.Errorf("WithWatchQueueBytes(0): %v, want ErrInvalidArgument", err)
	}
	if got := string(cowkv.PrefixEnd([]byte("a/"))); got != "a0" {
		t.Errorf("PrefixEnd(a/) = %q", got)
	}
	if got := cowkv.PrefixEnd([]byte{0xff, 0xff}); !bytes.Equal(got, []byte{0}) {
		t.Errorf("PrefixEnd(ff ff) = %q", got)
	}
}

func TestWatch(t *testing.T) {
	bin := serverBinary(t)
	srv := startServer(t, bin, t.TempDir(), "128M", "")
	defer srv.stop()
	ctx := context.Background()
	// A short default timeout: a watcher must outlive it.
	db, err := cowkv.Dial(ctx, srv.addr, cowkv.WithDefaultTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	fresh := func(t *testing.T) *cowkv.Subvolume {
		n++
		name := fmt.Sprintf("watch-%d", n)
		if _, err := db.CreateSubvolume(ctx, name); err != nil {
			t.Fatal(err)
		}
		return db.Subvolume(name)
	}
	t.Run("events", func(t *testing.T) { testWatchEvents(t, fresh(t)) })
	t.Run("history-and-compacted", func(t *testing.T) { testWatchHistory(t, fresh(t)) })
	t.Run("filters", func(t *testing.T) { testWatchFilters(t, fresh(t)) })
	t.Run("close-and-ctx", func(t *testing.T) { testWatchEnds(t, fresh(t)) })
	t.Run("subvolume-deleted", func(t *testing.T) { testWatchDeleted(t, db, fresh(t)) })
	t.Run("fragments", func(t *testing.T) { testWatchFragments(t, fresh(t)) })
	t.Run("refused", func(t *testing.T) {
		if _, err := db.Subvolume("no-such").Watch(ctx, []byte("k")); !errors.Is(err, cowkv.ErrNotFound) {
			t.Errorf("unknown subvolume: %v, want ErrNotFound", err)
		}
		if _, err := fresh(t).Watch(ctx, []byte("b"), cowkv.WatchRange([]byte("a"))); !errors.Is(err, cowkv.ErrInvalidArgument) {
			t.Errorf("range end before key: %v, want ErrInvalidArgument", err)
		}
	})
	t.Run("model", func(t *testing.T) { testWatchModel(t, fresh(t)) })
}

// take reads n events within 10 s.
func take(t *testing.T, w *cowkv.Watcher, n int) []cowkv.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []cowkv.Event
	for len(out) < n {
		ev, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("after %d events: %v", len(out), err)
		}
		out = append(out, ev)
	}
	return out
}

func describe(evs []cowkv.Event) string {
	s := ""
	for _, e := range evs {
		s += fmt.Sprintf("%v %s=%s@%d", e.Type, e.KV.Key, e.KV.Value, e.Revision())
		if e.PrevKV != nil {
			s += fmt.Sprintf("(prev %s@%d)", e.PrevKV.Value, e.PrevKV.ModRevision)
		}
		s += "; "
	}
	return s
}

func testWatchEvents(t *testing.T, sv *cowkv.Subvolume) {
	ctx := context.Background()
	w := must(sv.Watch(ctx, []byte("cfg/"), cowkv.WatchPrefix(), cowkv.WatchPrevKV()))(t)
	defer w.Close()
	time.Sleep(2500 * time.Millisecond) // past the client's default timeout
	r1 := must(sv.Put(ctx, []byte("cfg/a"), []byte("1")))(t)
	r2 := must(sv.Put(ctx, []byte("cfg/a"), []byte("2")))(t)
	must(sv.Put(ctx, []byte("cfg0"), []byte("outside")))(t)
	r3 := must(sv.Delete(ctx, []byte("cfg/a")))(t)
	tr := must(sv.If().Then(cowkv.OpPut([]byte("cfg/b"), []byte("x")),
		cowkv.OpPut([]byte("cfg/c"), []byte("y"))).Commit(ctx))(t)
	want := fmt.Sprintf("PUT cfg/a=1@%d; PUT cfg/a=2@%d(prev 1@%d); DELETE cfg/a=@%d(prev 2@%d); "+
		"PUT cfg/b=x@%d; PUT cfg/c=y@%d; ", r1, r2, r1, r3, r2, tr.Revision, tr.Revision)
	if got := describe(take(t, w, 5)); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	if w.Revision() < r1 {
		t.Errorf("Revision() = %d < %d", w.Revision(), r1)
	}
}

func testWatchHistory(t *testing.T, sv *cowkv.Subvolume) {
	ctx := context.Background()
	r1 := must(sv.Put(ctx, []byte("h"), []byte("1")))(t)
	r2 := must(sv.Put(ctx, []byte("h"), []byte("2")))(t)
	r3 := must(sv.Put(ctx, []byte("h"), []byte("3")))(t)
	w := must(sv.Watch(ctx, []byte("h"), cowkv.WatchFromRevision(r1)))(t)
	want := fmt.Sprintf("PUT h=1@%d; PUT h=2@%d; PUT h=3@%d; ", r1, r2, r3)
	if got := describe(take(t, w, 3)); got != want {
		t.Errorf("replay:\n got %s\nwant %s", got, want)
	}
	w.Close()
	if c := must(sv.Compact(ctx, r2))(t); c != r2 {
		t.Errorf("Compact(%d) = %d", r2, c)
	}
	for _, start := range []uint64{r1, r2} {
		// Created, then ended at once: the history read fails.
		w := must(sv.Watch(ctx, []byte("h"), cowkv.WatchFromRevision(start)))(t)
		var last error
		for _, err := range w.Events() {
			last = err
		}
		var ce *cowkv.Error
		if !errors.Is(last, cowkv.ErrCompacted) || !errors.Is(last, cowkv.ErrTooOld) || !errors.As(last, &ce) {
			t.Fatalf("start %d after Compact(%d): %v, want ErrCompacted", start, r2, last)
		}
		if ce.CompactRevision != r2+1 || ce.Reason != "COMPACTED" || cowkv.ErrorClass(last) != "compacted" {
			t.Errorf("compacted: revision %d reason %q, want %d COMPACTED", ce.CompactRevision, ce.Reason, r2+1)
		}
	}
	w = must(sv.Watch(ctx, []byte("h"), cowkv.WatchFromRevision(r2+1)))(t)
	defer w.Close()
	if got := describe(take(t, w, 1)); got != fmt.Sprintf("PUT h=3@%d; ", r3) {
		t.Errorf("from the compact revision: %s", got)
	}
}

func testWatchFilters(t *testing.T, sv *cowkv.Subvolume) {
	ctx := context.Background()
	np := must(sv.Watch(ctx, []byte("f"), cowkv.WatchNoPut()))(t)
	defer np.Close()
	nd := must(sv.Watch(ctx, []byte("f"), cowkv.WatchNoDelete()))(t)
	defer nd.Close()
	p1 := must(sv.Put(ctx, []byte("f"), []byte("1")))(t)
	d := must(sv.Delete(ctx, []byte("f")))(t)
	p2 := must(sv.Put(ctx, []byte("f"), []byte("2")))(t)
	if got := describe(take(t, np, 1)); got != fmt.Sprintf("DELETE f=@%d; ", d) {
		t.Errorf("NoPut: %s", got)
	}
	if got := describe(take(t, nd, 2)); got != fmt.Sprintf("PUT f=1@%d; PUT f=2@%d; ", p1, p2) {
		t.Errorf("NoDelete: %s", got)
	}
}

func testWatchEnds(t *testing.T, sv *cowkv.Subvolume) {
	ctx := context.Background()
	w := must(sv.Watch(ctx, []byte("quiet")))(t)
	time.AfterFunc(200*time.Millisecond, w.Close)
	for _, err := range w.Events() {
		t.Fatalf("Close: an event or error %v", err)
	}
	if _, err := w.Next(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("Next after Close: %v, want io.EOF", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	w = must(sv.Watch(cctx, []byte("quiet")))(t)
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	for _, err := range w.Events() {
		t.Fatalf("ctx cancel: an event or error %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("the iteration took %v to end", time.Since(start))
	}
}

func testWatchDeleted(t *testing.T, db *cowkv.DB, sv *cowkv.Subvolume) {
	ctx := context.Background()
	w := must(sv.Watch(ctx, []byte("k")))(t)
	defer w.Close()
	must(sv.Put(ctx, []byte("k"), []byte("v")))(t)
	take(t, w, 1)
	if err := db.DeleteSubvolume(ctx, sv.Name()); err != nil {
		t.Fatal(err)
	}
	var last error
	for _, err := range w.Events() {
		last = err
	}
	if !errors.Is(last, cowkv.ErrSubvolumeDeleted) || cowkv.ErrorClass(last) != "subvolume_deleted" {
		t.Errorf("after the delete: %v, want ErrSubvolumeDeleted", last)
	}
}

func testWatchFragments(t *testing.T, sv *cowkv.Subvolume) {
	ctx := context.Background()
	w := must(sv.Watch(ctx, []byte("big/"), cowkv.WatchPrefix()))(t)
	defer w.Close()
	var ops []cowkv.Op
	for i := range 3 {
		ops = append(ops, cowkv.OpPut([]byte(fmt.Sprint("big/", i)), bytes.Repeat([]byte{byte('a' + i)}, 700_000)))
	}
	tr := must(sv.If().Then(ops...).Commit(ctx))(t)
	for i, ev := range take(t, w, 3) {
		if ev.Revision() != tr.Revision || len(ev.KV.Value) != 700_000 || ev.KV.Value[0] != byte('a'+i) {
			t.Errorf("event %d: %s@%d (%d bytes)", i, ev.KV.Key, ev.Revision(), len(ev.KV.Value))
		}
	}
}

// testWatchModel: random puts, deletes and two-key txns on four keys; a
// prefix watcher with prev_kv started before them must report exactly the
// model's changes, and one started in the middle from an older revision
// the changes from there.
func testWatchModel(t *testing.T, sv *cowkv.Subvolume) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("COWKV_WATCH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (COWKV_WATCH_SEED=%d to replay)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	ctx := context.Background()
	w := must(sv.Watch(ctx, []byte("m/"), cowkv.WatchPrefix(), cowkv.WatchPrevKV()))(t)
	defer w.Close()
	model := map[string]string{}
	var want []string // "PUT k=v@rev(prev p)" / "DELETE k@rev(prev p)"
	change := func(k, v string, rev uint64) {
		prev, had := model[k]
		p := "-"
		if had {
			p = prev
		}
		if v == "" {
			want = append(want, fmt.Sprintf("DELETE %s@%d(prev %s)", k, rev, p))
			delete(model, k)
			return
		}
		want = append(want, fmt.Sprintf("PUT %s=%s@%d(prev %s)", k, v, rev, p))
		model[k] = v
	}
	midAt := 0
	for i := range 120 {
		k := fmt.Sprint("m/", rng.IntN(4))
		switch op := rng.IntN(10); {
		case op < 5:
			v := fmt.Sprint("v", i)
			change(k, v, must(sv.Put(ctx, []byte(k), []byte(v)))(t))
		case op < 8:
			if _, ok := model[k]; ok {
				change(k, "", must(sv.Delete(ctx, []byte(k)))(t))
			}
		default:
			k2 := fmt.Sprint("m/", 4+rng.IntN(2))
			v := fmt.Sprint("t", i)
			tr := must(sv.If().Then(cowkv.OpPut([]byte(k), []byte(v)),
				cowkv.OpPut([]byte(k2), []byte(v))).Commit(ctx))(t)
			change(k, v, tr.Revision)
			change(k2, v, tr.Revision)
		}
		if i == 60 {
			midAt = len(want)
		}
	}
	check := func(name string, w *cowkv.Watcher, want []string) {
		got := take(t, w, len(want))
		for i, e := range got {
			p := "-"
			if e.PrevKV != nil {
				p = string(e.PrevKV.Value)
			}
			s := fmt.Sprintf("PUT %s=%s@%d(prev %s)", e.KV.Key, e.KV.Value, e.Revision(), p)
			if e.Type == cowkv.EventDelete {
				s = fmt.Sprintf("DELETE %s@%d(prev %s)", e.KV.Key, e.Revision(), p)
			}
			if s != want[i] {
				t.Fatalf("%s: event %d = %s, want %s", name, i, s, want[i])
			}
		}
	}
	check("from the start", w, want)
	if midAt == len(want) {
		return
	}
	late := must(sv.Watch(ctx, []byte("m/"), cowkv.WatchPrefix(), cowkv.WatchPrevKV(),
		cowkv.WatchFromRevision(revisionOf(want[midAt]))))(t)
	defer late.Close()
	check("from an older revision", late, want[midAt:])
}

func revisionOf(s string) uint64 {
	var at int
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '@' {
			at = i
			break
		}
	}
	var rev uint64
	fmt.Sscanf(s[at+1:], "%d", &rev)
	return rev
}

// TestWatchSharedStreams: a DB's watchers share KV.Watch streams. Goal: 60
// watchers of one client work on a server that lets a client have only 3
// calls in flight (a stream per watcher would be refused TOO_MANY_CALLS
// past the third); closing some (Close, ctx) leaves the others' events
// intact; a reader that falls behind ends only its own watcher
// (ErrSlowReader) while another watcher of the same stream gets every
// event; after the last watcher closed, a new Watch opens a new stream.
func TestWatchSharedStreams(t *testing.T) {
	bin := serverBinary(t)
	srv := startServer(t, bin, t.TempDir(), "256M", "", "--max-calls-per-client", "3")
	defer srv.stop()
	ctx := context.Background()
	// A 2 MiB bound: the slow reader passes it while the stream carries far
	// less than the server's own 24 MiB bound, however slowly this test runs.
	db := must(cowkv.Dial(ctx, srv.addr, cowkv.WithWatchQueueBytes(2<<20)))(t)
	defer db.Close()
	sv := db.Subvolume("")
	const n = 60
	ws := make([]*cowkv.Watcher, n)
	cancels := make([]context.CancelFunc, n)
	for i := range n {
		wctx, cancel := context.WithCancel(ctx)
		cancels[i] = cancel
		ws[i] = must(sv.Watch(wctx, []byte(fmt.Sprint("s/", i))))(t)
	}
	for i := range n {
		must(sv.Put(ctx, []byte(fmt.Sprint("s/", i)), []byte("a")))(t)
	}
	for i := range n {
		if ev := take(t, ws[i], 1)[0]; string(ev.KV.Key) != fmt.Sprint("s/", i) {
			t.Fatalf("watcher %d got %s", i, ev.KV.Key)
		}
	}
	for i := 0; i < n; i += 3 { // a third closed, a third by their context
		ws[i].Close()
		cancels[i+1]()
	}
	for i := range n {
		must(sv.Put(ctx, []byte(fmt.Sprint("s/", i)), []byte("b")))(t)
	}
	for i := range n {
		if i%3 != 2 {
			if _, err := ws[i].Next(ctx); !errors.Is(err, io.EOF) {
				t.Fatalf("closed watcher %d: %v, want io.EOF", i, err)
			}
			continue
		}
		if ev := take(t, ws[i], 1)[0]; string(ev.KV.Value) != "b" {
			t.Fatalf("watcher %d got %s", i, ev.KV.Value)
		}
	}

	// One slow reader, one fast one, on the same stream.
	slow := must(sv.Watch(ctx, []byte("big")))(t)
	fast := must(sv.Watch(ctx, []byte("big")))(t)
	const puts = 4 // 4 MiB: past the client's 2 MiB per watcher
	done := make(chan error, 1)
	go func() {
		for range puts {
			if _, err := fast.Next(ctx); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	value := bytes.Repeat([]byte("v"), 1<<20)
	for range puts {
		must(sv.Put(ctx, []byte("big"), value))(t)
	}
	if err := <-done; err != nil {
		t.Fatalf("the fast reader: %v", err)
	}
	var last error
	n2 := 0
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for last == nil {
		if _, last = slow.Next(rctx); last == nil {
			n2++
		}
	}
	if !errors.Is(last, cowkv.ErrSlowReader) || n2 >= puts {
		t.Fatalf("the slow reader: %d events then %v, want ErrSlowReader before %d", n2, last, puts)
	}
	for i := 2; i < n; i += 3 {
		ws[i].Close()
	}
	fast.Close()
	slow.Close()
	w := must(sv.Watch(ctx, []byte("again")))(t) // a new stream
	defer w.Close()
	r := must(sv.Put(ctx, []byte("again"), []byte("x")))(t)
	if ev := take(t, w, 1)[0]; ev.Revision() != r {
		t.Fatalf("after reopening: %d, want %d", ev.Revision(), r)
	}
}
