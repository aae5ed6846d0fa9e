package cowkv

import (
	"context"
	"iter"

	"cowkv.dev/cowkv/internal/pb"
)

// Subvolume is a handle on one subvolume (or snapshot) of a DB: its key
// space and its file tree. Cheap; safe for concurrent use.
type Subvolume struct {
	db   *DB
	name string
}

// Name is the subvolume's name ("" = "default").
func (s *Subvolume) Name() string { return s.name }

// Durability says when a write is acknowledged.
type Durability int

const (
	// DurabilityDefault is the server's default (durable unless cowkvd runs
	// with --async-default).
	DurabilityDefault Durability = iota
	// DurabilityDurable: after the log sync that covers the write.
	DurabilityDurable
	// DurabilityAsync: once visible; durable by the next sync, in order.
	DurabilityAsync
)

func (d Durability) pb() pb.Durability {
	switch d {
	case DurabilityDurable:
		return pb.Durability_DURABILITY_DURABLE
	case DurabilityAsync:
		return pb.Durability_DURABILITY_ASYNC
	}
	return pb.Durability_DURABILITY_DEFAULT
}

// WriteOption configures a write (Put, Delete, DeleteRange, a one-shot
// transaction, Commit, lease Grant and Revoke; WithLease: Put and OpPut).
type WriteOption func(*writeOptions)

type writeOptions struct {
	durability Durability
	lease      LeaseID
}

// WithDurability sets when the write is acknowledged.
func WithDurability(d Durability) WriteOption { return func(o *writeOptions) { o.durability = d } }

func writeOpts(opts []WriteOption) writeOptions {
	var o writeOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// KeyValue is one key with its value and revisions.
type KeyValue struct {
	Key            []byte
	Value          []byte // empty for KeysOnly reads
	CreateRevision uint64 // revision of the write that created the key
	ModRevision    uint64 // revision of the last write to the key
	Version        uint64 // writes since creation; 1 = just created
}

func kvFrom(m *pb.KeyValue) KeyValue {
	return KeyValue{Key: m.GetKey(), Value: m.GetValue(), CreateRevision: m.GetCreateRevision(),
		ModRevision: m.GetModRevision(), Version: m.GetVersion()}
}

// ReadOption changes a Get.
type ReadOption func(*pb.GetRequest)

// AtRevision reads the key as it was at rev, from the subvolume's history
// (etcd's revision reads; 0 = the latest): ErrCompacted (with
// CompactRevision) below what the history keeps, ErrFutureRevision past
// the current revision.
func AtRevision(rev uint64) ReadOption { return func(r *pb.GetRequest) { r.Revision = rev } }

// Get reads a key's value (ErrNotFound if absent).
func (s *Subvolume) Get(ctx context.Context, key []byte, opts ...ReadOption) ([]byte, error) {
	kv, _, err := s.GetKV(ctx, key, opts...)
	return kv.Value, err
}

// GetKV reads a key with its revisions, and the store revision the read saw.
func (s *Subvolume) GetKV(ctx context.Context, key []byte, opts ...ReadOption) (KeyValue, uint64, error) {
	if err := firstErr(checkSubvolume("Get", s.name), checkKey("Get", "key", key)); err != nil {
		return KeyValue{}, 0, err
	}
	req := &pb.GetRequest{Subvolume: s.name, Key: key}
	for _, o := range opts {
		o(req)
	}
	m, err := s.db.kv.Get(ctx, req)
	if err != nil {
		return KeyValue{}, 0, wrap("Get", err)
	}
	return kvFrom(m.GetKv()), m.GetRevision(), nil
}

// Put writes a key (attached to a lease with WithLease); it returns the
// write's revision.
func (s *Subvolume) Put(ctx context.Context, key, value []byte, opts ...WriteOption) (uint64, error) {
	if err := firstErr(checkSubvolume("Put", s.name), checkKey("Put", "key", key), checkValue("Put", value)); err != nil {
		return 0, err
	}
	o := writeOpts(opts)
	m, err := s.db.kv.Put(ctx, &pb.PutRequest{Subvolume: s.name, Key: key, Value: value,
		Durability: o.durability.pb(), Lease: int64(o.lease)})
	if err != nil {
		return 0, wrap("Put", err)
	}
	return m.GetRevision(), nil
}

// Delete deletes a key (ErrNotFound if absent); it returns the revision.
func (s *Subvolume) Delete(ctx context.Context, key []byte, opts ...WriteOption) (uint64, error) {
	if err := firstErr(checkSubvolume("Delete", s.name), checkKey("Delete", "key", key)); err != nil {
		return 0, err
	}
	m, err := s.db.kv.Delete(ctx, &pb.DeleteRequest{Subvolume: s.name, Key: key,
		Durability: writeOpts(opts).durability.pb()})
	if err != nil {
		return 0, wrap("Delete", err)
	}
	return m.GetRevision(), nil
}

// KeyRange names keys: [Start, End) (empty Start = from the first key,
// empty End = through the last), or every key with Prefix (then Start and
// End must be empty).
type KeyRange struct {
	Start, End, Prefix []byte
}

// All is every key.
func All() KeyRange { return KeyRange{} }

// Prefix is every key that starts with p.
func Prefix(p []byte) KeyRange { return KeyRange{Prefix: p} }

// Between is [start, end); nil end = through the last key.
func Between(start, end []byte) KeyRange { return KeyRange{Start: start, End: end} }

func (r KeyRange) check(op string) error {
	if len(r.Prefix) > 0 && (len(r.Start) > 0 || len(r.End) > 0) {
		return invalid(op, "prefix: start and end must be empty when prefix is set")
	}
	return firstErr(checkBound(op, "start", r.Start), checkBound(op, "end", r.End),
		checkBound(op, "prefix", r.Prefix))
}

// RangeOption configures a range read.
type RangeOption func(*rangeOptions)

type rangeOptions struct {
	reverse, keysOnly, countOnly bool
	pageSize, limit              uint64
	snapshot                     string
	token                        []byte
	revision                     uint64
}

// RangeAtRevision reads the range as it was at rev, from the subvolume's
// history (every page at the same revision; errors as AtRevision).
func RangeAtRevision(rev uint64) RangeOption { return func(o *rangeOptions) { o.revision = rev } }

// Reverse reads largest keys first.
func Reverse() RangeOption { return func(o *rangeOptions) { o.reverse = true } }

// KeysOnly leaves values out.
func KeysOnly() RangeOption { return func(o *rangeOptions) { o.keysOnly = true } }

// CountOnly returns only the count (RangePage, OpRange).
func CountOnly() RangeOption { return func(o *rangeOptions) { o.countOnly = true } }

// PageSize is the keys fetched per call by iterators (0 = the server's
// page limit, 10,000).
func PageSize(n uint64) RangeOption { return func(o *rangeOptions) { o.pageSize = n } }

// Limit caps the keys returned: in all for iterators, in the page for
// RangePage and OpRange.
func Limit(n uint64) RangeOption { return func(o *rangeOptions) { o.limit = n } }

// AtSnapshot reads a read-only snapshot (by name) instead of the live
// subvolume: pages then form one consistent view.
func AtSnapshot(name string) RangeOption { return func(o *rangeOptions) { o.snapshot = name } }

// PageToken continues RangePage from a previous page's NextPageToken.
func PageToken(tok []byte) RangeOption { return func(o *rangeOptions) { o.token = tok } }

func rangeOpts(opts []RangeOption) rangeOptions {
	var o rangeOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Page is one Range response.
type Page struct {
	KVs           []KeyValue
	Count         uint64 // keys from this page's start: exact when !More or CountOnly
	More          bool
	Revision      uint64
	NextPageToken []byte // pass to PageToken for the next page; empty when !More
}

func pageFrom(m *pb.RangeResponse) Page {
	p := Page{Count: m.GetCount(), More: m.GetMore(), Revision: m.GetRevision(), NextPageToken: m.GetNextPageToken()}
	for _, kv := range m.GetKvs() {
		p.KVs = append(p.KVs, kvFrom(kv))
	}
	return p
}

func (s *Subvolume) rangeRequest(op string, r KeyRange, o rangeOptions) (*pb.RangeRequest, error) {
	if err := firstErr(checkSubvolume(op, s.name), r.check(op)); err != nil {
		return nil, err
	}
	if o.snapshot != "" {
		if err := checkName(op, "snapshot", o.snapshot); err != nil {
			return nil, err
		}
	}
	return &pb.RangeRequest{Subvolume: s.name, Start: r.Start, End: r.End, Prefix: r.Prefix,
		Reverse: o.reverse, KeysOnly: o.keysOnly, CountOnly: o.countOnly, Snapshot: o.snapshot,
		Revision: o.revision}, nil
}

// RangePage reads one page of a range: at most Limit keys (0 = the server's
// page limit), from PageToken if given.
func (s *Subvolume) RangePage(ctx context.Context, r KeyRange, opts ...RangeOption) (Page, error) {
	o := rangeOpts(opts)
	req, err := s.rangeRequest("Range", r, o)
	if err != nil {
		return Page{}, err
	}
	req.Limit, req.PageToken = o.limit, o.token
	m, err := s.db.kv.Range(ctx, req)
	if err != nil {
		return Page{}, wrap("Range", err)
	}
	return pageFrom(m), nil
}

// Count counts the keys of a range exactly.
func (s *Subvolume) Count(ctx context.Context, r KeyRange, opts ...RangeOption) (uint64, error) {
	p, err := s.RangePage(ctx, r, append(opts, CountOnly())...)
	return p.Count, err
}

// Range iterates the keys of a range, fetching a page at a time and
// continuing with the page token:
//
//	for kv, err := range sv.Range(ctx, cowkv.Prefix([]byte("user/"))) {
//		if err != nil { return err }
//		...
//	}
//
// Pages of a live subvolume are each consistent at their own revision; use
// AtSnapshot for one view. An error ends the iteration.
func (s *Subvolume) Range(ctx context.Context, r KeyRange, opts ...RangeOption) iter.Seq2[KeyValue, error] {
	o := rangeOpts(opts)
	req, err := s.rangeRequest("Range", r, o)
	return pages(err, req, o, func(req *pb.RangeRequest) (*pb.RangeResponse, error) {
		m, err := s.db.kv.Range(ctx, req)
		return m, wrap("Range", err)
	})
}

// pages is the paging iterator shared by Subvolume.Range and Tx.Range.
func pages(err error, req *pb.RangeRequest, o rangeOptions,
	fetch func(*pb.RangeRequest) (*pb.RangeResponse, error)) iter.Seq2[KeyValue, error] {
	return func(yield func(KeyValue, error) bool) {
		if err != nil {
			yield(KeyValue{}, err)
			return
		}
		var n uint64
		for {
			req.Limit = o.pageSize
			if o.limit > 0 && (req.Limit == 0 || o.limit-n < req.Limit) {
				req.Limit = o.limit - n
			}
			m, err := fetch(req)
			if err != nil {
				yield(KeyValue{}, err)
				return
			}
			for _, kv := range m.GetKvs() {
				if !yield(kvFrom(kv), nil) {
					return
				}
				if n++; o.limit > 0 && n >= o.limit {
					return
				}
			}
			if !m.GetMore() || len(m.GetNextPageToken()) == 0 {
				return
			}
			req.PageToken = m.GetNextPageToken()
		}
	}
}

// DeleteRange deletes every key of a range atomically (at most 10,000:
// ErrInvalidArgument past it). A range with no bound is refused so that an
// empty KeyRange never deletes everything; Between([]byte{0}, nil) does.
func (s *Subvolume) DeleteRange(ctx context.Context, r KeyRange, opts ...WriteOption) (deleted, revision uint64, err error) {
	if err := firstErr(checkSubvolume("DeleteRange", s.name), r.check("DeleteRange")); err != nil {
		return 0, 0, err
	}
	if len(r.Start) == 0 && len(r.End) == 0 && len(r.Prefix) == 0 {
		return 0, 0, invalid("DeleteRange", "one of start, end and prefix must be set")
	}
	m, err := s.db.kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Subvolume: s.name, Start: r.Start,
		End: r.End, Prefix: r.Prefix, Durability: writeOpts(opts).durability.pb()})
	if err != nil {
		return 0, 0, wrap("DeleteRange", err)
	}
	return m.GetDeleted(), m.GetRevision(), nil
}

// ---- One-shot conditional transactions (etcd's If/Then/Else) ----

// Cmp is one condition of a one-shot transaction.
type Cmp struct{ m *pb.Compare }

// ValueTarget compares a key's value (an absent key never matches).
type ValueTarget struct{ key []byte }

// Value compares key's value.
func Value(key []byte) ValueTarget { return ValueTarget{key} }

func (t ValueTarget) cmp(op pb.Compare_Op, v []byte) Cmp {
	return Cmp{&pb.Compare{Key: t.key, Target: pb.Compare_TARGET_VALUE, Op: op, Value: v}}
}

func (t ValueTarget) Equal(v []byte) Cmp    { return t.cmp(pb.Compare_OP_EQUAL, v) }
func (t ValueTarget) NotEqual(v []byte) Cmp { return t.cmp(pb.Compare_OP_NOT_EQUAL, v) }
func (t ValueTarget) Less(v []byte) Cmp     { return t.cmp(pb.Compare_OP_LESS, v) }
func (t ValueTarget) Greater(v []byte) Cmp  { return t.cmp(pb.Compare_OP_GREATER, v) }

// NumberTarget compares a key's version or revisions (0 for an absent key).
type NumberTarget struct {
	key    []byte
	target pb.Compare_Target
}

// Version compares key's version.
func Version(key []byte) NumberTarget { return NumberTarget{key, pb.Compare_TARGET_VERSION} }

// CreateRevision compares key's create revision.
func CreateRevision(key []byte) NumberTarget {
	return NumberTarget{key, pb.Compare_TARGET_CREATE_REVISION}
}

// ModRevision compares key's last modification revision.
func ModRevision(key []byte) NumberTarget { return NumberTarget{key, pb.Compare_TARGET_MOD_REVISION} }

func (t NumberTarget) cmp(op pb.Compare_Op, n uint64) Cmp {
	return Cmp{&pb.Compare{Key: t.key, Target: t.target, Op: op, Number: n}}
}

func (t NumberTarget) Equal(n uint64) Cmp    { return t.cmp(pb.Compare_OP_EQUAL, n) }
func (t NumberTarget) NotEqual(n uint64) Cmp { return t.cmp(pb.Compare_OP_NOT_EQUAL, n) }
func (t NumberTarget) Less(n uint64) Cmp     { return t.cmp(pb.Compare_OP_LESS, n) }
func (t NumberTarget) Greater(n uint64) Cmp  { return t.cmp(pb.Compare_OP_GREATER, n) }

// Exists holds when key exists.
func Exists(key []byte) Cmp {
	return Cmp{&pb.Compare{Key: key, Target: pb.Compare_TARGET_EXISTS, Op: pb.Compare_OP_EQUAL, Exists: true}}
}

// Missing holds when key does not exist.
func Missing(key []byte) Cmp {
	return Cmp{&pb.Compare{Key: key, Target: pb.Compare_TARGET_EXISTS, Op: pb.Compare_OP_EQUAL, Exists: false}}
}

// Op is one operation of a one-shot transaction branch.
type Op struct {
	m   *pb.RequestOp
	err error
}

// OpPut writes a key; of the options only WithLease applies (the
// transaction's durability is its own).
func OpPut(key, value []byte, opts ...WriteOption) Op {
	lease := writeOpts(opts).lease
	return Op{m: &pb.RequestOp{Op: &pb.RequestOp_Put{Put: &pb.PutOp{Key: key, Value: value, Lease: int64(lease)}}},
		err: firstErr(checkKey("Txn", "put.key", key), checkValue("Txn", value))}
}

// OpDelete deletes a key (absent is fine: Deleted = 0).
func OpDelete(key []byte) Op {
	return Op{m: &pb.RequestOp{Op: &pb.RequestOp_Delete{Delete: &pb.DeleteOp{Key: key}}},
		err: checkKey("Txn", "delete.key", key)}
}

// OpDeleteRange deletes [start, end).
func OpDeleteRange(start, end []byte) Op {
	return Op{m: &pb.RequestOp{Op: &pb.RequestOp_DeleteRange{DeleteRange: &pb.DeleteRangeOp{Start: start, End: end}}},
		err: KeyRange{Start: start, End: end}.check("Txn")}
}

// OpRange reads a range as it was before the transaction's writes (Limit,
// Reverse, KeysOnly, CountOnly apply; no paging).
func OpRange(r KeyRange, opts ...RangeOption) Op {
	o := rangeOpts(opts)
	return Op{m: &pb.RequestOp{Op: &pb.RequestOp_Range{Range: &pb.RangeOp{Start: r.Start, End: r.End,
		Prefix: r.Prefix, Limit: o.limit, Reverse: o.reverse, KeysOnly: o.keysOnly, CountOnly: o.countOnly}}},
		err: r.check("Txn")}
}

// OpResult is the result of one Op, in the same position.
type OpResult struct {
	Kind    string // "put", "delete" (OpDelete and OpDeleteRange) or "range"
	Deleted uint64 // delete: keys removed
	Range   Page   // range: the keys (NextPageToken is empty)
}

// TxnResult is the outcome of a one-shot transaction.
type TxnResult struct {
	Succeeded bool       // every compare held and Then ran
	Revision  uint64     // the writes' revision, or the revision read at
	Results   []OpResult // one per op of the branch that ran
}

// TxnBuilder builds a one-shot transaction: If(...).Then(...).Else(...).Commit(ctx).
type TxnBuilder struct {
	s         *Subvolume
	cmps      []Cmp
	then, els []Op
}

// If starts a one-shot conditional transaction on the subvolume: when every
// compare holds, the Then ops run, else the Else ops, atomically under one
// revision. A compare that does not hold is not an error.
func (s *Subvolume) If(cmps ...Cmp) *TxnBuilder { return &TxnBuilder{s: s, cmps: cmps} }

// Then sets the ops run when every compare holds.
func (b *TxnBuilder) Then(ops ...Op) *TxnBuilder { b.then = ops; return b }

// Else sets the ops run otherwise.
func (b *TxnBuilder) Else(ops ...Op) *TxnBuilder { b.els = ops; return b }

// Commit sends the transaction.
func (b *TxnBuilder) Commit(ctx context.Context, opts ...WriteOption) (TxnResult, error) {
	req := &pb.TxnRequest{Subvolume: b.s.name, Durability: writeOpts(opts).durability.pb()}
	if err := checkSubvolume("Txn", b.s.name); err != nil {
		return TxnResult{}, err
	}
	if len(b.cmps) > MaxTxnOps || len(b.then) > MaxTxnOps || len(b.els) > MaxTxnOps {
		return TxnResult{}, invalid("Txn", "a Txn has at most %d compares and %d ops per branch", MaxTxnOps, MaxTxnOps)
	}
	for _, c := range b.cmps {
		if err := checkKey("Txn", "compare.key", c.m.GetKey()); err != nil {
			return TxnResult{}, err
		}
		req.Compare = append(req.Compare, c.m)
	}
	for _, branch := range []struct {
		ops []Op
		dst *[]*pb.RequestOp
	}{{b.then, &req.Success}, {b.els, &req.Failure}} {
		for _, op := range branch.ops {
			if op.err != nil {
				return TxnResult{}, op.err
			}
			*branch.dst = append(*branch.dst, op.m)
		}
	}
	m, err := b.s.db.kv.Txn(ctx, req)
	if err != nil {
		return TxnResult{}, wrap("Txn", err)
	}
	res := TxnResult{Succeeded: m.GetSucceeded(), Revision: m.GetRevision()}
	for _, r := range m.GetResponses() {
		switch x := r.GetResult().(type) {
		case *pb.ResponseOp_Put:
			res.Results = append(res.Results, OpResult{Kind: "put"})
		case *pb.ResponseOp_Delete:
			res.Results = append(res.Results, OpResult{Kind: "delete", Deleted: x.Delete.GetDeleted()})
		case *pb.ResponseOp_Range:
			res.Results = append(res.Results, OpResult{Kind: "range", Range: pageFrom(x.Range)})
		}
	}
	return res, nil
}
