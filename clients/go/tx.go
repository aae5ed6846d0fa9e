package cowkv

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"time"

	"cowkv.dev/cowkv/internal/pb"
)

// Tx is an interactive transaction (Subvolume.Begin): reads see the latest
// state plus the transaction's own writes and are recorded; writes are
// buffered until Commit, which fails with ErrConflict if anything read
// changed meanwhile (ErrTooOld if the transaction outlived the server's
// conflict window). Prefer Subvolume.Txn, which retries those. A Tx is not
// safe for concurrent use.
type Tx struct {
	s        *Subvolume
	handle   uint64
	readRev  uint64
	lease    time.Duration
	finished bool
}

// TxOption configures Begin.
type TxOption func(*txOptions)

type txOptions struct{ lease time.Duration }

// Lease sets how long the server keeps the transaction without a call on
// it (0 = 30 s; at most 10 min).
func Lease(d time.Duration) TxOption { return func(o *txOptions) { o.lease = d } }

// Begin starts an interactive transaction. Finish it with Commit or Abort.
func (s *Subvolume) Begin(ctx context.Context, opts ...TxOption) (*Tx, error) {
	var o txOptions
	for _, f := range opts {
		f(&o)
	}
	if err := checkSubvolume("Begin", s.name); err != nil {
		return nil, err
	}
	ms := uint64(o.lease / time.Millisecond)
	if o.lease < 0 || ms > MaxLease {
		return nil, invalid("Begin", "lease_ms: at most %d ms, not %d", MaxLease, ms)
	}
	m, err := s.db.kv.Begin(ctx, &pb.BeginRequest{Subvolume: s.name, LeaseMs: ms})
	if err != nil {
		return nil, wrap("Begin", err)
	}
	return &Tx{s: s, handle: m.GetHandle(), readRev: m.GetReadRevision(),
		lease: time.Duration(m.GetLeaseMs()) * time.Millisecond}, nil
}

// ReadRevision is the revision the transaction reads at.
func (tx *Tx) ReadRevision() uint64 { return tx.readRev }

// Lease is the lease the server granted.
func (tx *Tx) Lease() time.Duration { return tx.lease }

// Get reads a key in the transaction (ErrNotFound if absent; recorded).
func (tx *Tx) Get(ctx context.Context, key []byte) ([]byte, error) {
	kv, err := tx.GetKV(ctx, key)
	return kv.Value, err
}

// GetKV reads a key with its revisions in the transaction.
func (tx *Tx) GetKV(ctx context.Context, key []byte) (KeyValue, error) {
	if err := checkKey("TxnGet", "key", key); err != nil {
		return KeyValue{}, err
	}
	m, err := tx.s.db.kv.TxnGet(ctx, &pb.TxnGetRequest{Handle: tx.handle, Key: key})
	if err != nil {
		return KeyValue{}, wrap("TxnGet", err)
	}
	return kvFrom(m.GetKv()), nil
}

// Range iterates a range in the transaction (recorded; sees own writes).
func (tx *Tx) Range(ctx context.Context, r KeyRange, opts ...RangeOption) iter.Seq2[KeyValue, error] {
	o := rangeOpts(opts)
	err := r.check("TxnRange")
	req := &pb.RangeRequest{Start: r.Start, End: r.End, Prefix: r.Prefix, Reverse: o.reverse, KeysOnly: o.keysOnly}
	return pages(err, req, o, func(req *pb.RangeRequest) (*pb.RangeResponse, error) {
		m, err := tx.s.db.kv.TxnRange(ctx, &pb.TxnRangeRequest{Handle: tx.handle, Range: req})
		return m, wrap("TxnRange", err)
	})
}

// Put buffers a write.
func (tx *Tx) Put(ctx context.Context, key, value []byte) error {
	if err := firstErr(checkKey("TxnPut", "key", key), checkValue("TxnPut", value)); err != nil {
		return err
	}
	_, err := tx.s.db.kv.TxnPut(ctx, &pb.TxnPutRequest{Handle: tx.handle, Key: key, Value: value})
	return wrap("TxnPut", err)
}

// Delete buffers the delete of a key.
func (tx *Tx) Delete(ctx context.Context, key []byte) error {
	if err := checkKey("TxnDelete", "key", key); err != nil {
		return err
	}
	_, err := tx.s.db.kv.TxnDelete(ctx, &pb.TxnDeleteRequest{Handle: tx.handle, Key: key})
	return wrap("TxnDelete", err)
}

// DeleteRange buffers the delete of [start, end) (nil end = through the last key).
func (tx *Tx) DeleteRange(ctx context.Context, start, end []byte) error {
	if err := firstErr(checkKey("TxnDelete", "key", start), checkBound("TxnDelete", "end", end)); err != nil {
		return err
	}
	_, err := tx.s.db.kv.TxnDelete(ctx, &pb.TxnDeleteRequest{Handle: tx.handle, Key: start, Range: true, End: end})
	return wrap("TxnDelete", err)
}

// Commit validates and applies the transaction; it returns the revision of
// its writes. The transaction is finished whatever the result.
func (tx *Tx) Commit(ctx context.Context, opts ...WriteOption) (uint64, error) {
	tx.finished = true
	m, err := tx.s.db.kv.Commit(ctx, &pb.CommitRequest{Handle: tx.handle, Durability: writeOpts(opts).durability.pb()})
	if err != nil {
		return 0, wrap("Commit", err)
	}
	return m.GetRevision(), nil
}

// Abort drops the transaction and its buffered writes.
func (tx *Tx) Abort(ctx context.Context) error {
	tx.finished = true
	_, err := tx.s.db.kv.Abort(ctx, &pb.AbortRequest{Handle: tx.handle})
	return wrap("Abort", err)
}

// ---- The retry helper ----

// The retry helper's defaults, the same in every client (docs/api.md,
// "Retrying transactions"; clients/conformance/retry_rule.json).
const (
	DefaultMaxAttempts  = 10
	DefaultFirstBackoff = 10 * time.Millisecond
	DefaultMaxBackoff   = time.Second
)

// TxnOption configures Subvolume.RunInTransaction.
type TxnOption func(*txnOptions)

type txnOptions struct {
	attempts   int
	base, max  time.Duration
	lease      time.Duration
	durability Durability
	sleep      func(context.Context, time.Duration) error // tests replace it
}

// MaxAttempts bounds the runs of the transaction (default 10).
func MaxAttempts(n int) TxnOption { return func(o *txnOptions) { o.attempts = n } }

// Backoff sets the first and the largest wait between attempts (default
// 10 ms and 1 s); each wait is a random time in [d/2, d], d doubling.
func Backoff(first, max time.Duration) TxnOption {
	return func(o *txnOptions) { o.base, o.max = first, max }
}

// TxnLease sets the lease of each attempt's transaction.
func TxnLease(d time.Duration) TxnOption { return func(o *txnOptions) { o.lease = d } }

// TxnDurability sets the durability of the commit.
func TxnDurability(d Durability) TxnOption { return func(o *txnOptions) { o.durability = d } }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoff is the wait before attempt n+1 (n >= 1): random in [d/2, d] with
// d = min(max, first * 2^(n-1)).
func backoff(n int, first, max time.Duration) time.Duration {
	d := first
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// Retryable reports whether err means "run the whole transaction again"
// (ErrConflict, ErrTooOld).
func Retryable(err error) bool { return errors.Is(err, ErrConflict) || errors.Is(err, ErrTooOld) }

// RunInTransaction runs fn in an interactive transaction and commits it
// (the retry helper of every cowkv client, docs/api.md "Retrying
// transactions"; Begin starts one without retries). When fn or the
// commit fails with ErrConflict or ErrTooOld (or the handle expired), the
// transaction is run again from the start after a jittered exponential
// backoff, up to MaxAttempts; fn must therefore be safe to run more than
// once and do all its reads through tx. Any other error from fn aborts the
// transaction and is returned as is.
func (s *Subvolume) RunInTransaction(ctx context.Context, fn func(tx *Tx) error, opts ...TxnOption) error {
	o := txnOptions{attempts: DefaultMaxAttempts, base: DefaultFirstBackoff, max: DefaultMaxBackoff, sleep: sleepCtx}
	for _, f := range opts {
		f(&o)
	}
	for attempt := 1; ; attempt++ {
		err := s.txnOnce(ctx, fn, o)
		if err == nil || !Retryable(err) {
			return err
		}
		if attempt >= o.attempts {
			return fmt.Errorf("cowkv: transaction gave up after %d attempts: %w", attempt, err)
		}
		if serr := o.sleep(ctx, backoff(attempt, o.base, o.max)); serr != nil {
			return wrap("Txn", serr)
		}
	}
}

// Txn is the old name of RunInTransaction.
//
// Deprecated: use RunInTransaction (Txn is the one-shot conditional in the
// other clients; this alias goes in the next release).
func (s *Subvolume) Txn(ctx context.Context, fn func(tx *Tx) error, opts ...TxnOption) error {
	return s.RunInTransaction(ctx, fn, opts...)
}

func (s *Subvolume) txnOnce(ctx context.Context, fn func(tx *Tx) error, o txnOptions) (err error) {
	var bopts []TxOption
	if o.lease > 0 {
		bopts = append(bopts, Lease(o.lease))
	}
	tx, err := s.Begin(ctx, bopts...)
	if err != nil {
		return err
	}
	defer func() {
		if !tx.finished {
			// Best effort: the lease frees the handle anyway.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = tx.Abort(actx)
			cancel()
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	_, err = tx.Commit(ctx, WithDurability(o.durability))
	return err
}
