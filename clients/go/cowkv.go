// Package cowkv is the Go client of cowkvd, the cowkv gRPC server.
//
//	db, err := cowkv.Dial(ctx, "127.0.0.1:7420", cowkv.WithToken(token))
//	if err != nil { ... }
//	defer db.Close()
//	sv := db.Subvolume("default")
//	rev, err := sv.Put(ctx, []byte("k"), []byte("v"))
//	v, err := sv.Get(ctx, []byte("k"))
//	if errors.Is(err, cowkv.ErrNotFound) { ... }
//	err = sv.RunInTransaction(ctx, func(tx *cowkv.Tx) error { ... }) // retried on conflict
//
// Every method takes a context; a call without a deadline gets the client's
// default timeout (WithDefaultTimeout, 30 s unless set). Errors are *Error
// values that match the package's sentinel errors with errors.Is.
package cowkv

import (
	"context"
	"crypto/tls"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"cowkv.dev/cowkv/internal/pb"
)

// DefaultAddress is cowkvd's default listen address.
const DefaultAddress = "127.0.0.1:7420"

// DefaultTimeout is the deadline given to calls whose context has none.
const DefaultTimeout = 30 * time.Second

type options struct {
	tls         *tls.Config
	token       string
	timeout     time.Duration
	waitReady   bool
	dialOptions []grpc.DialOption
	watchQueue  int64
	retry       *UnavailableRetry
}

// Option configures Dial.
type Option func(*options)

// WithTLS connects over TLS with this configuration (nil = system roots).
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) {
		if cfg == nil {
			cfg = &tls.Config{}
		}
		o.tls = cfg
	}
}

// WithToken sends "authorization: Bearer <token>" with every call (cowkvd
// --auth-token-file).
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithDefaultTimeout sets the deadline of calls whose context has none;
// 0 = no default deadline.
func WithDefaultTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithWaitReady makes Dial wait (under its context) until the connection is
// up, instead of connecting lazily on the first call.
func WithWaitReady() Option { return func(o *options) { o.waitReady = true } }

// WithWatchQueueBytes bounds a watcher's unread events, in bytes: a reader
// that falls further behind ends its watcher with ErrSlowReader (default
// 16 MiB; one larger revision is still handed over whole).
func WithWatchQueueBytes(n int64) Option { return func(o *options) { o.watchQueue = n } }

// WithDialOptions passes extra options to grpc.NewClient.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOptions = append(o.dialOptions, opts...) }
}

// DB is a connection to one cowkvd. It is safe for concurrent use.
type DB struct {
	conn  *grpc.ClientConn
	subv  pb.SubvolumesClient
	kv    pb.KVClient
	files pb.FilesClient
	admin pb.AdminClient
	lease pb.LeaseClient
	// timeout is the default deadline (WithDefaultTimeout); Watch bounds
	// the wait for the server's create answer with it.
	timeout time.Duration
	// watches are the KV.Watch streams the DB's watchers share.
	watches watchMux
}

type tokenCreds struct {
	token  string
	secure bool
}

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + t.token}, nil
}
func (t tokenCreds) RequireTransportSecurity() bool { return t.secure }

// noDefaultTimeoutKey marks a context whose stream must not get the client's
// default timeout (a background keep-alive lives as long as its context).
type noDefaultTimeoutKey struct{}

func withoutDefaultTimeout(ctx context.Context) context.Context {
	return context.WithValue(ctx, noDefaultTimeoutKey{}, true)
}

func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// Dial connects to cowkvd at addr ("host:port"). Without WithWaitReady the
// connection is made on the first call and ctx is not used.
func Dial(ctx context.Context, addr string, opts ...Option) (*DB, error) {
	o := options{timeout: DefaultTimeout, watchQueue: watchQueueBytes}
	for _, opt := range opts {
		opt(&o)
	}
	if o.watchQueue < 1 {
		return nil, invalid("Dial", "WithWatchQueueBytes: %d < 1", o.watchQueue)
	}
	dial := []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(20<<20), grpc.MaxCallSendMsgSize(20<<20)),
	}
	if o.tls != nil {
		dial = append(dial, grpc.WithTransportCredentials(credentials.NewTLS(o.tls)))
	} else {
		dial = append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if o.token != "" {
		dial = append(dial, grpc.WithPerRPCCredentials(tokenCreds{o.token, o.tls != nil}))
	}
	timeout := o.timeout
	dial = append(dial,
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
			cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			ctx, cancel := withDefaultTimeout(ctx, timeout)
			defer cancel()
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc,
			cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			if _, ok := ctx.Deadline(); ok || timeout <= 0 || ctx.Value(noDefaultTimeoutKey{}) != nil {
				return streamer(ctx, desc, cc, method, opts...)
			}
			// The stream's context must outlive this call: cancel it when the
			// stream ends (the helpers in this package always drain streams).
			ctx, cancel := context.WithTimeout(ctx, timeout)
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				cancel()
				return nil, err
			}
			context.AfterFunc(s.Context(), cancel)
			return s, nil
		}))
	if o.retry != nil {
		cfg, err := o.retry.serviceConfig()
		if err != nil {
			return nil, err
		}
		dial = append(dial, grpc.WithDefaultServiceConfig(cfg))
	}
	dial = append(dial, o.dialOptions...)
	conn, err := grpc.NewClient(addr, dial...)
	if err != nil {
		return nil, wrap("Dial", err)
	}
	db := &DB{conn: conn, subv: pb.NewSubvolumesClient(conn), kv: pb.NewKVClient(conn),
		files: pb.NewFilesClient(conn), admin: pb.NewAdminClient(conn), lease: pb.NewLeaseClient(conn),
		timeout: timeout, watches: watchMux{queueBytes: o.watchQueue}}
	if o.waitReady {
		conn.Connect()
		for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
			if !conn.WaitForStateChange(ctx, st) {
				conn.Close()
				return nil, wrap("Dial", ctx.Err())
			}
		}
	}
	return db, nil
}

// Close closes the connection; open transactions are left to their leases.
func (db *DB) Close() error { return db.conn.Close() }

// Subvolume returns a handle on a subvolume (or snapshot) by name; "" is
// "default". No call is made: a missing subvolume fails at first use.
func (db *DB) Subvolume(name string) *Subvolume { return &Subvolume{db: db, name: name} }

// RunInTransaction runs fn in an interactive transaction on the "default"
// subvolume and commits it, retrying conflicts: see
// Subvolume.RunInTransaction.
func (db *DB) RunInTransaction(ctx context.Context, fn func(tx *Tx) error, opts ...TxnOption) error {
	return db.Subvolume("").RunInTransaction(ctx, fn, opts...)
}

// Txn is the old name of RunInTransaction.
//
// Deprecated: use RunInTransaction; this alias goes in the next release.
func (db *DB) Txn(ctx context.Context, fn func(tx *Tx) error, opts ...TxnOption) error {
	return db.RunInTransaction(ctx, fn, opts...)
}

// SubvolumeInfo describes one subvolume.
type SubvolumeInfo struct {
	ID           uint64
	Name         string
	ParentID     uint64 // the subvolume this is a snapshot of; 0 = none
	Generation   uint64
	LastSnapshot uint64
	Created      time.Time
	ReadOnly     bool
}

func infoFrom(m *pb.SubvolumeInfo) SubvolumeInfo {
	return SubvolumeInfo{ID: m.GetId(), Name: m.GetName(), ParentID: m.GetParentId(),
		Generation: m.GetGeneration(), LastSnapshot: m.GetLastSnapshot(),
		Created: time.UnixMilli(int64(m.GetCreatedUnixMs())), ReadOnly: m.GetReadOnly()}
}

// CreateSubvolume creates an empty subvolume (ErrAlreadyExists if taken).
func (db *DB) CreateSubvolume(ctx context.Context, name string) (SubvolumeInfo, error) {
	if err := checkName("CreateSubvolume", "name", name); err != nil {
		return SubvolumeInfo{}, err
	}
	m, err := db.subv.Create(ctx, &pb.CreateSubvolumeRequest{Name: name})
	if err != nil {
		return SubvolumeInfo{}, wrap("CreateSubvolume", err)
	}
	return infoFrom(m), nil
}

// ListOption filters or sorts ListSubvolumes.
type ListOption func(*pb.ListSubvolumesRequest)

// OnlyReadOnly keeps read-only subvolumes (btrfs subvolume list -r).
func OnlyReadOnly() ListOption { return func(r *pb.ListSubvolumesRequest) { r.ReadOnly = true } }

// OnlySnapshots keeps snapshots, parent_id != 0 (btrfs subvolume list -s).
func OnlySnapshots() ListOption { return func(r *pb.ListSubvolumesRequest) { r.SnapshotsOnly = true } }

// SortBy sorts by keys "[+|-]FIELD", FIELD one of gen, ogen, rootid (id),
// path (name); "-" descending, ties by id (btrfs --sort). An unknown key is
// ErrInvalidArgument naming it.
func SortBy(keys ...string) ListOption {
	return func(r *pb.ListSubvolumesRequest) { r.Sort = append(r.Sort, keys...) }
}

// ListSubvolumes lists every live subvolume ("default" included) in id
// order, filtered and sorted by the server as opts say.
func (db *DB) ListSubvolumes(ctx context.Context, opts ...ListOption) ([]SubvolumeInfo, error) {
	req := &pb.ListSubvolumesRequest{}
	for _, o := range opts {
		o(req)
	}
	m, err := db.subv.List(ctx, req)
	if err != nil {
		return nil, wrap("ListSubvolumes", err)
	}
	out := make([]SubvolumeInfo, 0, len(m.GetSubvolumes()))
	for _, s := range m.GetSubvolumes() {
		out = append(out, infoFrom(s))
	}
	return out, nil
}

// SyncSubvolumes waits until deleted subvolumes' trees are dropped and
// their space is free (btrfs subvolume sync): the given ids, or every
// subvolume deleted before the call. It returns the ids it waited for;
// ErrNotFound for an id that never was a subvolume, ErrFailedPrecondition
// for a live one. The server stops waiting shortly before ctx's deadline
// (ErrDeadlineExceeded naming the ids still pending).
func (db *DB) SyncSubvolumes(ctx context.Context, ids ...uint64) ([]uint64, error) {
	req := &pb.SyncSubvolumesRequest{Ids: ids}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		req.TimeoutMs = uint64(max(time.Millisecond, left-min(500*time.Millisecond, left/10)).Milliseconds())
	}
	m, err := db.subv.Sync(ctx, req)
	if err != nil {
		return nil, wrap("SyncSubvolumes", err)
	}
	return m.GetSynced(), nil
}

// ShowSubvolume describes one subvolume (ErrNotFound if absent).
func (db *DB) ShowSubvolume(ctx context.Context, name string) (SubvolumeInfo, error) {
	if err := checkName("ShowSubvolume", "name", name); err != nil {
		return SubvolumeInfo{}, err
	}
	m, err := db.subv.Show(ctx, &pb.ShowSubvolumeRequest{Name: name})
	if err != nil {
		return SubvolumeInfo{}, wrap("ShowSubvolume", err)
	}
	return infoFrom(m), nil
}

// RenameSubvolume renames a subvolume; its id and contents stay.
func (db *DB) RenameSubvolume(ctx context.Context, name, newName string) error {
	if err := firstErr(checkName("RenameSubvolume", "name", name),
		checkName("RenameSubvolume", "new_name", newName)); err != nil {
		return err
	}
	_, err := db.subv.Rename(ctx, &pb.RenameSubvolumeRequest{Name: name, NewName: newName})
	return wrap("RenameSubvolume", err)
}

// DeleteSubvolume deletes a subvolume ("default" cannot be deleted:
// ErrFailedPrecondition). Its snapshots stay.
func (db *DB) DeleteSubvolume(ctx context.Context, name string) error {
	if err := checkName("DeleteSubvolume", "name", name); err != nil {
		return err
	}
	_, err := db.subv.Delete(ctx, &pb.DeleteSubvolumeRequest{Name: name})
	return wrap("DeleteSubvolume", err)
}

// Snapshot snapshots source as name, in O(1). A read-only snapshot refuses
// writes (ErrReadOnly) and gives consistent reads across calls.
func (db *DB) Snapshot(ctx context.Context, source, name string, readOnly bool) (SubvolumeInfo, error) {
	if err := firstErr(checkName("Snapshot", "source", source), checkName("Snapshot", "name", name)); err != nil {
		return SubvolumeInfo{}, err
	}
	m, err := db.subv.Snapshot(ctx, &pb.SnapshotRequest{Source: source, Name: name, ReadOnly: readOnly})
	if err != nil {
		return SubvolumeInfo{}, wrap("Snapshot", err)
	}
	return infoFrom(m), nil
}

// Sync commits everything written so far; it returns the commit's generation.
func (db *DB) Sync(ctx context.Context) (uint64, error) {
	m, err := db.admin.Sync(ctx, &pb.SyncRequest{})
	if err != nil {
		return 0, wrap("Sync", err)
	}
	return m.GetGeneration(), nil
}

// CheckResult is the outcome of an online check.
type CheckResult struct {
	OK        bool
	Problems  []string
	Rechecked bool
}

// Check verifies the last committed state (Admin.Check). Findings are data,
// not an error.
func (db *DB) Check(ctx context.Context) (CheckResult, error) {
	m, err := db.admin.Check(ctx, &pb.CheckRequest{})
	if err != nil {
		return CheckResult{}, wrap("Check", err)
	}
	return CheckResult{OK: m.GetOk(), Problems: m.GetProblems(), Rechecked: m.GetRechecked()}, nil
}

// Version returns the server's version string and API name.
func (db *DB) Version(ctx context.Context) (server, api string, err error) {
	m, err := db.admin.Version(ctx, &pb.VersionRequest{})
	if err != nil {
		return "", "", wrap("Version", err)
	}
	return m.GetVersion(), m.GetApi(), nil
}

// Stats returns the server's counters by their proto field names
// (Admin.Stats: "commits", "log_syncs", "server_open_handles", ...).
func (db *DB) Stats(ctx context.Context) (map[string]uint64, error) {
	m, err := db.admin.Stats(ctx, &pb.StatsRequest{})
	if err != nil {
		return nil, wrap("Stats", err)
	}
	out := map[string]uint64{}
	r := m.ProtoReflect()
	fields := r.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		switch v := r.Get(f).Interface().(type) {
		case uint64:
			out[string(f.Name())] = v
		case uint32:
			out[string(f.Name())] = uint64(v)
		}
	}
	return out, nil
}
