package cowkv

// Leases (service cowkv.v1.Lease, etcd's lease API), per subvolume:
//
//	leases := sv.Leases()
//	g, err := leases.Grant(ctx, 10, 0)                // TTL 10 s; id 0 = the server picks
//	_, err = sv.Put(ctx, k, v, cowkv.WithLease(g.ID)) // deleted when the lease goes
//	ka, err := leases.KeepAlive(kactx, g.ID)          // renews every TTL/3 until kactx ends
//	...
//	_, err = leases.Revoke(ctx, g.ID)                 // deletes k in one revision
//
// An unknown lease (or one whose deadline passed) is ErrNotFound (ErrorInfo
// reason LEASE_NOT_FOUND). docs/api.md "Leases" has the whole contract.

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"cowkv.dev/cowkv/internal/pb"
)

// LeaseID names a lease of a subvolume (etcd's clientv3.LeaseID). A
// server-picked id is a random positive int64.
type LeaseID int64

// NoLease is the zero LeaseID: a put with it detaches the key from any lease.
const NoLease LeaseID = 0

// MaxLeaseTTL is the largest lease TTL, in seconds (the smallest is 1).
const MaxLeaseTTL = specMaxLeaseTtlSeconds // 9,000,000,000 (clients/spec/limits.json)

// minKeepAliveInterval bounds how often KeepAlive renews a short lease.
const minKeepAliveInterval = 100 * time.Millisecond

// WithLease attaches a Put (or an OpPut) to a lease; without it (or with
// NoLease) the put detaches the key from any lease, as etcd's. A lease that
// does not exist is ErrNotFound and nothing is written. Other writes ignore it.
func WithLease(id LeaseID) WriteOption { return func(o *writeOptions) { o.lease = id } }

// LeaseGrant is a granted lease.
type LeaseGrant struct {
	ID  LeaseID
	TTL int64 // seconds
}

// LeaseInfo describes a lease (TimeToLive).
type LeaseInfo struct {
	ID         LeaseID
	TTL        int64    // seconds left, rounded up; 0 once the deadline passed until expiry runs
	GrantedTTL int64    // the TTL it was granted with, in seconds
	Keys       [][]byte // the attached keys, sorted (only when asked for)
}

// Leases are the leases of one subvolume (Subvolume.Leases). Safe for
// concurrent use.
type Leases struct{ s *Subvolume }

// Leases returns the subvolume's leases. No call is made.
func (s *Subvolume) Leases() *Leases { return &Leases{s} }

func checkLeaseTTL(op string, ttl int64) error {
	if ttl < 1 || ttl > MaxLeaseTTL {
		return invalid(op, "ttl: %d out of range 1..%d", ttl, int64(MaxLeaseTTL))
	}
	return nil
}

// Grant creates a lease of ttl seconds (1..MaxLeaseTTL) with this id (>= 1),
// or an id the server picks (NoLease). ErrAlreadyExists for an id in use.
// Of the options only WithDurability applies.
func (l *Leases) Grant(ctx context.Context, ttl int64, id LeaseID, opts ...WriteOption) (LeaseGrant, error) {
	if err := firstErr(checkSubvolume("LeaseGrant", l.s.name), checkLeaseTTL("LeaseGrant", ttl)); err != nil {
		return LeaseGrant{}, err
	}
	if id < 0 {
		return LeaseGrant{}, invalid("LeaseGrant", "id: %d < 0", id)
	}
	m, err := l.s.db.lease.Grant(ctx, &pb.LeaseGrantRequest{Subvolume: l.s.name, Ttl: ttl, Id: int64(id),
		Durability: writeOpts(opts).durability.pb()})
	if err != nil {
		return LeaseGrant{}, wrap("LeaseGrant", err)
	}
	return LeaseGrant{ID: LeaseID(m.GetId()), TTL: m.GetTtl()}, nil
}

// Revoke deletes the lease and every key attached to it, in one revision,
// which it returns (the current revision if no key was left). ErrNotFound
// if there is no such lease. Of the options only WithDurability applies.
func (l *Leases) Revoke(ctx context.Context, id LeaseID, opts ...WriteOption) (uint64, error) {
	if err := checkSubvolume("LeaseRevoke", l.s.name); err != nil {
		return 0, err
	}
	m, err := l.s.db.lease.Revoke(ctx, &pb.LeaseRevokeRequest{Subvolume: l.s.name, Id: int64(id),
		Durability: writeOpts(opts).durability.pb()})
	if err != nil {
		return 0, wrap("LeaseRevoke", err)
	}
	return m.GetRevision(), nil
}

// KeepAliveOnce renews the lease once, on a KeepAlive stream of its own, and
// returns its restarted TTL in seconds. ErrNotFound if the lease is gone.
func (l *Leases) KeepAliveOnce(ctx context.Context, id LeaseID) (int64, error) {
	if err := checkSubvolume("LeaseKeepAlive", l.s.name); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream
	stream, err := l.s.db.lease.KeepAlive(ctx)
	if err != nil {
		return 0, wrap("LeaseKeepAlive", err)
	}
	if err := stream.Send(&pb.LeaseKeepAliveRequest{Subvolume: l.s.name, Id: int64(id)}); err != nil && !errors.Is(err, io.EOF) {
		return 0, wrap("LeaseKeepAlive", err)
	}
	m, err := stream.Recv() // after io.EOF from Send, Recv has the stream's status
	if err != nil {
		return 0, wrap("LeaseKeepAlive", err)
	}
	if m.GetTtl() <= 0 {
		return 0, newError("LeaseKeepAlive", codes.NotFound, "lease not found (the KeepAlive stream answered ttl 0)")
	}
	return m.GetTtl(), nil
}

// KeepAlive keeps the lease alive in the background, on one KeepAlive
// stream, until ctx ends: it renews now and then every TTL/3 after each
// answer. ctx's deadline, if any, bounds the whole keep-alive (the client's
// default timeout does not apply to it). The returned handle tells when it
// stopped and why.
func (l *Leases) KeepAlive(ctx context.Context, id LeaseID) (*KeepAlive, error) {
	if err := checkSubvolume("LeaseKeepAlive", l.s.name); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(withoutDefaultTimeout(ctx))
	stream, err := l.s.db.lease.KeepAlive(ctx)
	if err != nil {
		cancel()
		return nil, wrap("LeaseKeepAlive", err)
	}
	k := &KeepAlive{ID: id, done: make(chan struct{})}
	go func() {
		defer cancel()
		k.finish(k.run(ctx, stream, &pb.LeaseKeepAliveRequest{Subvolume: l.s.name, Id: int64(id)}))
	}()
	return k, nil
}

// KeepAlive is a running background keep-alive (Leases.KeepAlive).
type KeepAlive struct {
	ID   LeaseID
	done chan struct{}

	mu  sync.Mutex
	ttl int64 // guarded by mu: the last answer's TTL
	err error // guarded by mu: why it stopped, once done is closed
}

// Done is closed when the keep-alive has stopped.
func (k *KeepAlive) Done() <-chan struct{} { return k.done }

// Err is why the keep-alive stopped, once Done is closed: nil when its
// context ended it, ErrNotFound when the lease was found gone, or the error
// that broke the stream. Nil while it runs.
func (k *KeepAlive) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// TTL is the TTL of the last answer, in seconds (0 before the first).
func (k *KeepAlive) TTL() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ttl
}

func (k *KeepAlive) finish(err error) {
	k.mu.Lock()
	k.err = err
	k.mu.Unlock()
	close(k.done)
}

func (k *KeepAlive) run(ctx context.Context, stream pb.Lease_KeepAliveClient, req *pb.LeaseKeepAliveRequest) error {
	for {
		if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
			return k.streamErr(ctx, err)
		}
		m, err := stream.Recv()
		if err != nil {
			return k.streamErr(ctx, err)
		}
		if m.GetTtl() <= 0 {
			return newError("LeaseKeepAlive", codes.NotFound, "lease not found (the KeepAlive stream answered ttl 0)")
		}
		k.mu.Lock()
		k.ttl = m.GetTtl()
		k.mu.Unlock()
		wait := max(time.Duration(m.GetTtl())*time.Second/3, minKeepAliveInterval)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// streamErr: a stream broken by the end of ctx is a clean stop.
func (k *KeepAlive) streamErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return wrap("LeaseKeepAlive", err)
}

// TimeToLive describes the lease: its remaining and granted TTL, and with
// keys its attached keys. ErrNotFound if there is no such lease.
func (l *Leases) TimeToLive(ctx context.Context, id LeaseID, keys bool) (LeaseInfo, error) {
	if err := checkSubvolume("LeaseTimeToLive", l.s.name); err != nil {
		return LeaseInfo{}, err
	}
	m, err := l.s.db.lease.TimeToLive(ctx, &pb.LeaseTimeToLiveRequest{Subvolume: l.s.name, Id: int64(id), Keys: keys})
	if err != nil {
		return LeaseInfo{}, wrap("LeaseTimeToLive", err)
	}
	return LeaseInfo{ID: LeaseID(m.GetId()), TTL: m.GetTtl(), GrantedTTL: m.GetGrantedTtl(), Keys: m.GetKeys()}, nil
}

// List returns the ids of the subvolume's leases, in increasing order.
func (l *Leases) List(ctx context.Context) ([]LeaseID, error) {
	if err := checkSubvolume("LeaseList", l.s.name); err != nil {
		return nil, err
	}
	m, err := l.s.db.lease.Leases(ctx, &pb.LeaseLeasesRequest{Subvolume: l.s.name})
	if err != nil {
		return nil, wrap("LeaseList", err)
	}
	ids := make([]LeaseID, 0, len(m.GetIds()))
	for _, id := range m.GetIds() {
		ids = append(ids, LeaseID(id))
	}
	return ids, nil
}
