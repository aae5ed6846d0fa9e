package cowkv_test

// Send and receive against live cowkvd servers ($COWKVD or
// ../../bazel-bin/server/cowkvd): full streams into the same server and a
// second one, an incremental stream, a resumable receive cut by the client
// and resumed from the listed token, abort, and refused tokens. Every copy
// must have its source's Digest.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"testing"
	"time"

	"cowkv.dev/cowkv"
)

// errCut ends the upload of a receive the test cuts by cancelling it.
var errCut = errors.New("upload dropped by the test")

// slowCut yields data, then (after a pause that lets the server apply what
// arrived) errCut: Receive then cancels the call, as a client that dies.
type slowCut struct{ r io.Reader }

func (c *slowCut) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if errors.Is(err, io.EOF) {
		time.Sleep(300 * time.Millisecond)
		return n, errCut
	}
	return n, err
}

// fillRandom writes a random history into sv: keys put and deleted, a big
// random file (several send chunks) and a small one.
func fillRandom(t *testing.T, rng *rand.Rand, sv *cowkv.Subvolume, round int) {
	ctx := context.Background()
	for i := 0; i < 40; i++ {
		k := []byte(fmt.Sprintf("k%03d", rng.Intn(60)))
		if rng.Intn(4) == 0 {
			if _, err := sv.Delete(ctx, k); err != nil && !errors.Is(err, cowkv.ErrNotFound) {
				t.Fatal(err)
			}
			continue
		}
		must(sv.Put(ctx, k, []byte(fmt.Sprint("v", round, "-", rng.Int63()))))(t)
	}
	big := make([]byte, 1<<20+rng.Intn(2<<20))
	rng.Read(big)
	if _, _, err := sv.WriteFile(ctx, fmt.Sprint("/big", round), big, cowkv.Create(0o644)); err != nil {
		t.Fatal(err)
	}
	small := []byte(fmt.Sprint("round ", round))
	if _, _, err := sv.WriteFile(ctx, "/small", small, cowkv.Create(0o644), cowkv.Truncate()); err != nil {
		t.Fatal(err)
	}
}

func mustDigest(t *testing.T, db *cowkv.DB, name string) string {
	t.Helper()
	return must(db.Digest(context.Background(), name))(t)
}

// waitPartial waits until the server lists the partial receive name, no
// longer in use (a cancelled call ends on the server asynchronously).
func waitPartial(t *testing.T, db *cowkv.DB, name string) cowkv.PartialReceive {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		for _, p := range must(db.PartialReceives(context.Background()))(t) {
			if p.Name == name && !p.InUse {
				return p
			}
		}
	}
	t.Fatalf("partial receive %q not listed", name)
	return cowkv.PartialReceive{}
}

func wantReason(t *testing.T, err, kind error, reason string) {
	t.Helper()
	var ce *cowkv.Error
	if !errors.Is(err, kind) || !errors.As(err, &ce) || ce.Reason != reason {
		t.Fatalf("got %v, want %v with reason %s", err, kind, reason)
	}
}

func TestSendReceive(t *testing.T) {
	bin := serverBinary(t)
	a := startServer(t, bin, t.TempDir(), "256M", "")
	defer a.stop()
	b := startServer(t, bin, t.TempDir(), "256M", "")
	defer b.stop()
	ctx := context.Background()
	dbA := must(cowkv.Dial(ctx, a.addr))(t)
	defer dbA.Close()
	dbB := must(cowkv.Dial(ctx, b.addr))(t)
	defer dbB.Close()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	must(dbA.CreateSubvolume(ctx, "src"))(t)
	fillRandom(t, rng, dbA.Subvolume("src"), 1)
	must(dbA.Snapshot(ctx, "src", "s1", true))(t)
	fillRandom(t, rng, dbA.Subvolume("src"), 2)
	must(dbA.Snapshot(ctx, "src", "s2", true))(t)

	// Full: into a buffer, then into the same server under a new name.
	var full bytes.Buffer
	stats := must(dbA.SendTo(ctx, &full, "s1"))(t)
	if stats.Bytes != uint64(full.Len()) || stats.Records == 0 {
		t.Fatalf("stats %+v for %d bytes", stats, full.Len())
	}
	got := must(dbA.Receive(ctx, bytes.NewReader(full.Bytes()), cowkv.ReceiveName("s1copy")))(t)
	if got.Name != "s1copy" || got.Incremental || got.Bytes != stats.Bytes {
		t.Fatalf("receive %+v, send %+v", got, stats)
	}
	if mustDigest(t, dbA, "s1copy") != mustDigest(t, dbA, "s1") {
		t.Fatal("s1copy's digest differs from s1's")
	}
	// Full, piped from A's stream into B (the sender's name kept).
	s := must(dbA.Send(ctx, "s1"))(t)
	got = must(dbB.Receive(ctx, s))(t)
	if got.Name != "s1" || s.Stats() == nil || mustDigest(t, dbB, "s1") != mustDigest(t, dbA, "s1") {
		t.Fatalf("piped receive %+v: digest differs or no stats", got)
	}
	// Incremental: s2 against s1, which B holds as received.
	s = must(dbA.Send(ctx, "s2", cowkv.SendParent("s1")))(t)
	got = must(dbB.Receive(ctx, s))(t)
	if !got.Incremental || got.Parent != "s1" || mustDigest(t, dbB, "s2") != mustDigest(t, dbA, "s2") {
		t.Fatalf("incremental receive %+v: digest differs", got)
	}
	testResume(t, rng, dbA, dbB)
}

// testResume cuts resumable receives of s2 (full) mid-stream and resumes
// one from its token, checks refused tokens and names, and aborts another.
func testResume(t *testing.T, rng *rand.Rand, dbA, dbB *cowkv.DB) {
	ctx := context.Background()
	var full bytes.Buffer
	must(dbA.SendTo(ctx, &full, "s2"))(t)
	// A stream that ends early (a truncated upload) keeps a partial receive.
	cut := func(name string) {
		half := bytes.NewReader(full.Bytes()[:full.Len()/4+rng.Intn(full.Len()/2)])
		_, err := dbB.Receive(ctx, half, cowkv.ReceiveName(name), cowkv.ReceiveResumable())
		wantReason(t, err, cowkv.ErrDataLoss, "STREAM_CORRUPT")
	}
	cut("cut")
	p := waitPartial(t, dbB, "cut")
	if p.Token == "" || p.UUID == "" {
		t.Fatalf("partial receive %+v", p)
	}
	// A damaged token is refused by the sender; a new receive into the
	// partial receive's name by the receiver.
	bad := []byte(p.Token)
	bad[len(bad)/2] ^= 1
	s := must(dbA.Send(ctx, "", cowkv.SendResumeToken(string(bad))))(t)
	_, err := s.Next()
	wantReason(t, err, cowkv.ErrInvalidArgument, "RESUME_TOKEN")
	_, err = dbB.Receive(ctx, bytes.NewReader(full.Bytes()), cowkv.ReceiveName("cut"))
	wantReason(t, err, cowkv.ErrAlreadyExists, "PARTIAL_RECEIVE")
	// The continuation completes the copy.
	s = must(dbA.Send(ctx, "", cowkv.SendResumeToken(p.Token)))(t)
	got := must(dbB.Receive(ctx, s))(t)
	if got.Name != "cut" || mustDigest(t, dbB, "cut") != mustDigest(t, dbA, "s2") {
		t.Fatalf("resumed receive %+v: digest differs", got)
	}
	// The used token is stale now: its continuation does not fit.
	s = must(dbA.Send(ctx, "", cowkv.SendResumeToken(p.Token)))(t)
	_, err = dbB.Receive(ctx, s)
	wantReason(t, err, cowkv.ErrNotFound, "RESUME_MISMATCH")
	// A receive the client cancels mid-stream keeps a partial receive too;
	// abort drops it, and a second abort finds none.
	r := &slowCut{r: bytes.NewReader(full.Bytes()[:full.Len()/2])}
	if _, err := dbB.Receive(ctx, r, cowkv.ReceiveName("drop"), cowkv.ReceiveResumable()); !errors.Is(err, errCut) {
		t.Fatalf("cancelled receive: %v", err)
	}
	waitPartial(t, dbB, "drop")
	if err := dbB.AbortReceive(ctx, "drop"); err != nil {
		t.Fatal(err)
	}
	wantReason(t, dbB.AbortReceive(ctx, "drop"), cowkv.ErrNotFound, "RESUME_MISMATCH")
	for _, p := range must(dbB.PartialReceives(ctx))(t) {
		t.Fatalf("partial receive left: %+v", p)
	}
	_, err = io.ReadAll(must(dbA.Send(ctx, "nosuch"))(t))
	if !errors.Is(err, cowkv.ErrNotFound) {
		t.Fatalf("send of a missing snapshot: %v", err)
	}
}
