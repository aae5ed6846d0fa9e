package cowkv_test

// Leases against a live cowkvd ($COWKVD or ../../bazel-bin/server/cowkvd).
//
// Goal: the lease surface (Grant, Put/OpPut WithLease, TimeToLive, List,
// Revoke, KeepAliveOnce, the background KeepAlive) does what docs/api.md
// "Leases" says, with expiry and errors. Method: direct cases with TTLs of
// 1-2 s, and a seeded random walk of grants, puts with and without leases,
// deletes and revokes checked against a model after every step.
// Replay: COWKV_LEASE_SEED=N go test -run TestLeases/model.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"cowkv.dev/cowkv"
)

func TestLeaseClientChecks(t *testing.T) {
	db, err := cowkv.Dial(context.Background(), deadAddress(t)) // never contacted
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l := db.Subvolume("").Leases()
	ctx := context.Background()
	for _, ttl := range []int64{0, -1, cowkv.MaxLeaseTTL + 1} {
		if _, err := l.Grant(ctx, ttl, 0); !errors.Is(err, cowkv.ErrInvalidArgument) {
			t.Errorf("Grant(ttl %d) = %v, want ErrInvalidArgument", ttl, err)
		}
	}
	if _, err := l.Grant(ctx, 10, -1); !errors.Is(err, cowkv.ErrInvalidArgument) {
		t.Errorf("Grant(id -1) = %v, want ErrInvalidArgument", err)
	}
	if _, err := db.Subvolume("a/b").Leases().List(ctx); !errors.Is(err, cowkv.ErrInvalidArgument) {
		t.Errorf("List on a bad subvolume name = %v, want ErrInvalidArgument", err)
	}
}

func TestLeases(t *testing.T) {
	bin := serverBinary(t)
	srv := startServer(t, bin, t.TempDir(), "64M", "")
	defer srv.stop()
	ctx := context.Background()
	// A short default timeout: the background keep-alive must not inherit it.
	db, err := cowkv.Dial(ctx, srv.addr, cowkv.WithDefaultTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	fresh := func(t *testing.T) *cowkv.Subvolume {
		n++
		name := fmt.Sprintf("lease-%d", n)
		if _, err := db.CreateSubvolume(ctx, name); err != nil {
			t.Fatal(err)
		}
		return db.Subvolume(name)
	}
	t.Run("grant-put-ttl-revoke", func(t *testing.T) { testLeaseBasics(t, fresh(t)) })
	t.Run("expiry", func(t *testing.T) { testLeaseExpiry(t, fresh(t)) })
	t.Run("keep-alive", func(t *testing.T) {
		short, err := cowkv.Dial(ctx, srv.addr, cowkv.WithDefaultTimeout(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer short.Close()
		sv := fresh(t)
		testKeepAlive(t, sv, short.Subvolume(sv.Name()))
	})
	t.Run("unknown", func(t *testing.T) { testUnknownLease(t, db, fresh(t)) })
	t.Run("model", func(t *testing.T) { testLeaseModel(t, fresh(t)) })
}

func leaseKeys(t *testing.T, sv *cowkv.Subvolume) []string {
	t.Helper()
	out := []string{}
	for kv, err := range sv.Range(context.Background(), cowkv.Prefix([]byte("k")), cowkv.KeysOnly()) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(kv.Key))
	}
	return out
}

func strs(b [][]byte) []string {
	out := []string{}
	for _, k := range b {
		out = append(out, string(k))
	}
	return out
}

// must(f())(t) is f's value, or fails the test with f's error.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func testLeaseBasics(t *testing.T, sv *cowkv.Subvolume) {
	ctx, l := context.Background(), sv.Leases()
	g := must(l.Grant(ctx, 60, cowkv.NoLease))(t)
	if g.ID <= 0 || g.TTL != 60 {
		t.Fatalf("Grant = %+v", g)
	}
	if mine := must(l.Grant(ctx, 30, 77))(t); mine.ID != 77 {
		t.Fatalf("Grant(id 77) = %+v", mine)
	}
	if _, err := l.Grant(ctx, 30, 77); !errors.Is(err, cowkv.ErrAlreadyExists) {
		t.Fatalf("Grant(77) again = %v, want ErrAlreadyExists", err)
	}
	must(sv.Put(ctx, []byte("k1"), []byte("a"), cowkv.WithLease(g.ID)))(t)
	must(sv.If().Then(cowkv.OpPut([]byte("k2"), []byte("b"), cowkv.WithLease(g.ID)),
		cowkv.OpPut([]byte("k3"), []byte("c"))).Commit(ctx))(t)
	must(sv.Put(ctx, []byte("k4"), []byte("d"), cowkv.WithLease(77)))(t)
	info := must(l.TimeToLive(ctx, g.ID, true))(t)
	if info.ID != g.ID || info.GrantedTTL != 60 || info.TTL <= 0 || info.TTL > 60 ||
		!slices.Equal(strs(info.Keys), []string{"k1", "k2"}) {
		t.Fatalf("TimeToLive = %+v", info)
	}
	if k := must(l.TimeToLive(ctx, g.ID, false))(t).Keys; len(k) != 0 {
		t.Fatalf("TimeToLive without keys has keys %q", k)
	}
	want := []cowkv.LeaseID{77, g.ID}
	slices.Sort(want)
	if ids := must(l.List(ctx))(t); !slices.Equal(ids, want) {
		t.Fatalf("List = %v, want %v", ids, want)
	}
	if ttl := must(l.KeepAliveOnce(ctx, g.ID))(t); ttl != 60 {
		t.Fatalf("KeepAliveOnce = %d", ttl)
	}
	if rev := must(l.Revoke(ctx, g.ID))(t); rev == 0 {
		t.Fatal("Revoke revision 0")
	}
	if got := leaseKeys(t, sv); !slices.Equal(got, []string{"k3", "k4"}) {
		t.Fatalf("keys after Revoke = %q", got)
	}
}

func testLeaseExpiry(t *testing.T, sv *cowkv.Subvolume) {
	ctx, l := context.Background(), sv.Leases()
	g := must(l.Grant(ctx, 1, 0))(t)
	must(sv.Put(ctx, []byte("k"), []byte("v"), cowkv.WithLease(g.ID)))(t)
	time.Sleep(1800 * time.Millisecond)
	if _, err := sv.Get(ctx, []byte("k")); !errors.Is(err, cowkv.ErrNotFound) {
		t.Fatalf("Get after expiry = %v, want ErrNotFound", err)
	}
	if _, err := l.TimeToLive(ctx, g.ID, false); !errors.Is(err, cowkv.ErrNotFound) {
		t.Fatalf("TimeToLive after expiry = %v, want ErrNotFound", err)
	}
}

// testKeepAlive: short is the same subvolume through a client whose default
// timeout (500 ms) is far shorter than the keep-alive.
func testKeepAlive(t *testing.T, sv, short *cowkv.Subvolume) {
	ctx := context.Background()
	g := must(sv.Leases().Grant(ctx, 1, 0))(t)
	must(sv.Put(ctx, []byte("k"), []byte("v"), cowkv.WithLease(g.ID)))(t)
	kactx, stop := context.WithCancel(ctx)
	ka := must(short.Leases().KeepAlive(kactx, g.ID))(t)
	time.Sleep(2500 * time.Millisecond)
	if v, err := sv.Get(ctx, []byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("Get 2.5 s into a kept-alive 1 s lease = %q, %v", v, err)
	}
	if ka.TTL() != 1 {
		t.Fatalf("TTL() = %d", ka.TTL())
	}
	stop()
	<-ka.Done()
	if ka.Err() != nil {
		t.Fatalf("Err() after cancel = %v, want nil", ka.Err())
	}
	time.Sleep(1800 * time.Millisecond)
	if _, err := sv.Get(ctx, []byte("k")); !errors.Is(err, cowkv.ErrNotFound) {
		t.Fatalf("Get after the keep-alive stopped = %v, want ErrNotFound", err)
	}
	// A lease that goes while kept alive: Err is ErrNotFound.
	g2 := must(sv.Leases().Grant(ctx, 1, 0))(t)
	must(sv.Leases().Revoke(ctx, g2.ID))(t)
	lost := must(sv.Leases().KeepAlive(ctx, g2.ID))(t)
	select {
	case <-lost.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("keep-alive of a revoked lease did not stop")
	}
	if !errors.Is(lost.Err(), cowkv.ErrNotFound) {
		t.Fatalf("Err() of a lost lease = %v, want ErrNotFound", lost.Err())
	}
}

func testUnknownLease(t *testing.T, db *cowkv.DB, sv *cowkv.Subvolume) {
	ctx, l, id := context.Background(), sv.Leases(), cowkv.LeaseID(424242)
	checks := map[string]error{}
	_, checks["Revoke"] = l.Revoke(ctx, id)
	_, checks["TimeToLive"] = l.TimeToLive(ctx, id, true)
	_, checks["KeepAliveOnce"] = l.KeepAliveOnce(ctx, id)
	_, checks["Put"] = sv.Put(ctx, []byte("k"), []byte("v"), cowkv.WithLease(id))
	_, checks["OpPut"] = sv.If().Then(cowkv.OpPut([]byte("k"), []byte("v"), cowkv.WithLease(id))).Commit(ctx)
	_, checks["Get"] = sv.Get(ctx, []byte("k"))
	_, checks["List(no such subvolume)"] = db.Subvolume("no-such-subvolume").Leases().List(ctx)
	for name, err := range checks {
		if !errors.Is(err, cowkv.ErrNotFound) || cowkv.ErrorClass(err) != "not_found" {
			t.Errorf("%s = %v, want ErrNotFound", name, err)
		}
	}
}

func testLeaseModel(t *testing.T, sv *cowkv.Subvolume) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("COWKV_LEASE_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	ctx, l := context.Background(), sv.Leases()
	owner := map[string]cowkv.LeaseID{} // key -> lease (NoLease = none)
	leases := map[cowkv.LeaseID]bool{}
	for step := range 120 {
		where := fmt.Sprintf("seed=%d step=%d (replay: COWKV_LEASE_SEED=%d)", seed, step, seed)
		key, id := fmt.Sprintf("k%d", rng.IntN(6)), cowkv.LeaseID(1+rng.IntN(3))
		var err error
		switch rng.IntN(5) {
		case 0:
			_, err = l.Grant(ctx, 60, id)
			err = expect(err, leases[id], cowkv.ErrAlreadyExists)
			leases[id] = true
		case 1, 2:
			lease := id
			if rng.IntN(3) == 0 {
				lease = cowkv.NoLease
			}
			_, err = sv.Put(ctx, []byte(key), []byte("v"), cowkv.WithLease(lease))
			err = expect(err, lease != cowkv.NoLease && !leases[lease], cowkv.ErrNotFound)
			if err == nil && (lease == cowkv.NoLease || leases[lease]) {
				owner[key] = lease
			}
		case 3:
			if _, ok := owner[key]; ok {
				_, err = sv.Delete(ctx, []byte(key))
				delete(owner, key)
			}
		default:
			_, err = l.Revoke(ctx, id)
			err = expect(err, !leases[id], cowkv.ErrNotFound)
			delete(leases, id)
			for k, o := range owner {
				if o == id {
					delete(owner, k)
				}
			}
		}
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		checkLeaseModel(t, sv, owner, leases, where)
	}
}

// expect: err must be the sentinel when fail, else nil.
func expect(err error, fail bool, sentinel error) error {
	if fail && !errors.Is(err, sentinel) {
		return fmt.Errorf("got %v, want %v", err, sentinel)
	}
	if !fail && err != nil {
		return err
	}
	return nil
}

func checkLeaseModel(t *testing.T, sv *cowkv.Subvolume, owner map[string]cowkv.LeaseID,
	leases map[cowkv.LeaseID]bool, where string) {
	t.Helper()
	ctx := context.Background()
	wantKeys := []string{}
	for k := range owner {
		wantKeys = append(wantKeys, k)
	}
	slices.Sort(wantKeys)
	if got := leaseKeys(t, sv); !slices.Equal(got, wantKeys) {
		t.Fatalf("%s: keys %q, model %q", where, got, wantKeys)
	}
	wantIDs := []cowkv.LeaseID{}
	for id := range leases {
		wantIDs = append(wantIDs, id)
	}
	slices.Sort(wantIDs)
	if got := must(sv.Leases().List(ctx))(t); !slices.Equal(got, wantIDs) {
		t.Fatalf("%s: leases %v, model %v", where, got, wantIDs)
	}
	for _, id := range wantIDs {
		want := []string{}
		for k, o := range owner {
			if o == id {
				want = append(want, k)
			}
		}
		slices.Sort(want)
		if got := strs(must(sv.Leases().TimeToLive(ctx, id, true))(t).Keys); !slices.Equal(got, want) {
			t.Fatalf("%s: lease %d keys %q, model %q", where, id, got, want)
		}
	}
}
