package cowkv

// Watch (KV.Watch, etcd's watch): the changes of a key or a range as they
// become durable, in revision order.
//
//	w, err := sv.Watch(ctx, []byte("cfg/"), cowkv.WatchPrefix(), cowkv.WatchPrevKV())
//	if err != nil { ... }          // a refused create
//	defer w.Close()
//	for ev, err := range w.Events() {
//		if err != nil { ... }      // ErrCompacted, ErrSubvolumeDeleted, ErrSlowReader, ...
//		fmt.Println(ev.Type, string(ev.KV.Key), ev.Revision())
//	}
//
// The watchers of a DB share bidirectional KV.Watch streams, up to the
// server's 1,000 per stream (watch_stream.go): one stream costs the server
// a thread and counts once against its --max-calls-per-client. Each
// watcher holds at most WithWatchQueueBytes (16 MiB) of unread events; a reader that
// falls further behind ends its watcher with ErrSlowReader, so one slow
// reader never holds back the others. ctx governs the watcher: when it
// ends (or Close is called) the watcher ends and the iteration stops
// without an error. The client's default timeout bounds only the wait for
// the server to create the watcher.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	"cowkv.dev/cowkv/internal/pb"
)

// EventType is what happened to a key.
type EventType int

const (
	EventPut    EventType = iota // the key was written (created or changed)
	EventDelete                  // the key was deleted (Delete, DeleteRange, or its lease's end)
)

func (t EventType) String() string {
	if t == EventDelete {
		return "DELETE"
	}
	return "PUT"
}

// Event is one change of one key (etcd's mvccpb.Event). KV is the key as
// the change left it; for a delete only Key and ModRevision (the delete's
// revision). PrevKV is the key before the change (WatchPrevKV watchers;
// nil when the change created it).
type Event struct {
	Type   EventType
	KV     KeyValue
	PrevKV *KeyValue

	file *FileEvent // a file watcher's event instead (FileWatcher)
}

// Revision is the revision of the change.
func (e Event) Revision() uint64 { return e.KV.ModRevision }

// WatchOption configures Watch.
type WatchOption func(*watchOptions)

type watchOptions struct {
	prefix, prevKV, noPut, noDelete, progress bool
	end                                       []byte
	start                                     uint64
}

// WatchPrefix watches every key that starts with the key.
func WatchPrefix() WatchOption { return func(o *watchOptions) { o.prefix = true } }

// WatchRange watches the keys in [key, end); end "\x00" = every key from key on.
func WatchRange(end []byte) WatchOption { return func(o *watchOptions) { o.end = end } }

// WatchFromRevision starts at an older revision, served from the history
// (ErrCompacted if it is gone); 0 = the next change.
func WatchFromRevision(rev uint64) WatchOption { return func(o *watchOptions) { o.start = rev } }

// WatchPrevKV gives each event the key before the change.
func WatchPrevKV() WatchOption { return func(o *watchOptions) { o.prevKV = true } }

// WatchNoPut leaves put events out.
func WatchNoPut() WatchOption { return func(o *watchOptions) { o.noPut = true } }

// WatchNoDelete leaves delete events out.
func WatchNoDelete() WatchOption { return func(o *watchOptions) { o.noDelete = true } }

// WatchProgressNotify asks the server for an empty response now and then
// while nothing changes; Watcher.Revision then advances.
func WatchProgressNotify() WatchOption { return func(o *watchOptions) { o.progress = true } }

// PrefixEnd is the end of the range of every key that starts with p
// (etcd's GetPrefixRangeEnd): "\x00" (every key) for a prefix of 0xff bytes.
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for len(end) > 0 && end[len(end)-1] == 0xff {
		end = end[:len(end)-1]
	}
	if len(end) == 0 {
		return []byte{0}
	}
	end[len(end)-1]++
	return end
}

func (s *Subvolume) watchCreate(key []byte, o watchOptions) (*pb.WatchCreateRequest, error) {
	if err := checkSubvolume("Watch", s.name); err != nil {
		return nil, err
	}
	if o.prefix && len(o.end) > 0 {
		return nil, invalid("Watch", "give WatchPrefix or WatchRange, not both")
	}
	if err := checkWatchKey(key, o); err != nil {
		return nil, err
	}
	end := o.end
	if o.prefix {
		end = PrefixEnd(key)
	}
	var filters []pb.WatchCreateRequest_FilterType
	if o.noPut {
		filters = append(filters, pb.WatchCreateRequest_NOPUT)
	}
	if o.noDelete {
		filters = append(filters, pb.WatchCreateRequest_NODELETE)
	}
	return &pb.WatchCreateRequest{Subvolume: s.name, Key: key, RangeEnd: end, StartRevision: o.start,
		PrevKv: o.prevKV, Filters: filters, ProgressNotify: o.progress}, nil
}

// checkWatchKey refuses what the server would (docs/api.md "Watch").
func checkWatchKey(key []byte, o watchOptions) error {
	if len(key) > MaxKeyBytes {
		return invalid("Watch", "key: %d bytes > %d", len(key), MaxKeyBytes)
	}
	if len(key) == 0 && len(o.end) == 0 && !o.prefix {
		return invalid("Watch", "key: empty (watch a range or a prefix instead)")
	}
	return nil
}

// Watcher is one watcher (Subvolume.Watch). Read it with Events or Next
// from one goroutine; Close from any.
type Watcher struct {
	ID int64 // the watcher's id on its stream

	s          *watchStream
	created    chan struct{} // closed at the server's create answer
	items      chan []Event  // whole revisions, for the reader
	queued     atomic.Int64  // bytes of events in items
	queueBound int64         // WithWatchQueueBytes
	done       chan struct{} // closed at the end, after endErr is set
	endErr     error         // why it ended; nil for a clean end (Close, ctx)
	endOnce    sync.Once
	closed     atomic.Bool
	revision   atomic.Uint64
	ctxMu      sync.Mutex
	stopCtx    func() bool // unhooks Close from the Watch context (under ctxMu)

	// The receiving goroutine's own: a revision being joined from fragments.
	fragments     []Event
	fragmentBytes int64

	// The reader's own.
	mu      sync.Mutex
	pending []Event
	end     error // the end, once read (io.EOF for a clean one)
}

// Watch creates a watcher on key (WatchPrefix, WatchRange for more keys)
// and returns once the server created it, so every change made after it
// returns is seen. A refused create is its error (ErrNotFound for an
// unknown subvolume, ErrInvalidArgument, ...). A start revision the history
// no longer keeps ends the watcher at its first read with ErrCompacted (an
// *Error whose CompactRevision is the oldest revision still served:
// restart there); so may any other end, if the server knows it at once.
// ctx governs the watcher: when it ends, the watcher ends (as Close).
func (s *Subvolume) Watch(ctx context.Context, key []byte, opts ...WatchOption) (*Watcher, error) {
	var o watchOptions
	for _, f := range opts {
		f(&o)
	}
	create, err := s.watchCreate(key, o)
	if err != nil {
		return nil, err
	}
	return s.startWatch(ctx, create)
}

// startWatch sends create on a shared stream and waits for its answer.
func (s *Subvolume) startWatch(ctx context.Context, create *pb.WatchCreateRequest) (*Watcher, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrap("Watch", err)
	}
	st, id, err := s.db.watches.stream(s.db)
	if err != nil {
		return nil, err
	}
	w := &Watcher{s: st, created: make(chan struct{}), items: make(chan []Event, watchQueueBatches),
		done: make(chan struct{}), queueBound: s.db.watches.queueBytes}
	st.add(w, id)
	create.WatchId = id
	st.send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: create}})
	if err := w.awaitCreated(ctx, s.db.timeout); err != nil {
		return nil, err
	}
	w.ctxMu.Lock()
	w.stopCtx = context.AfterFunc(ctx, w.Close)
	w.ctxMu.Unlock()
	return w, nil
}

// awaitCreated waits for the create's answer, within the client's default
// timeout unless ctx has a deadline.
func (w *Watcher) awaitCreated(ctx context.Context, timeout time.Duration) error {
	var late <-chan time.Time
	if _, ok := ctx.Deadline(); !ok && timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		late = t.C
	}
	select {
	case <-w.created:
		return nil
	case <-w.done: // refused, or the stream failed
		if w.endErr != nil {
			return w.endErr
		}
		return newError("Watch", codes.Canceled, "the watcher ended before it was created")
	case <-late:
		w.Close()
		return newError("Watch", codes.DeadlineExceeded, "the server did not create the watcher in time")
	case <-ctx.Done():
		w.Close()
		return wrap("Watch", ctx.Err())
	}
}

// finish ends the watcher once: err nil is a clean end.
func (w *Watcher) finish(err error) {
	w.endOnce.Do(func() {
		w.endErr = err
		close(w.done)
	})
}

// deliver handles one response for this watcher, on the stream's
// receiving goroutine; it never blocks. It reports whether the watcher
// goes on.
func (w *Watcher) deliver(r *pb.WatchResponse) bool {
	w.revision.Store(max(w.revision.Load(), r.GetRevision()))
	if r.GetCanceled() {
		var end error
		if r.GetCancelCode() != pb.WatchCancelCode_WATCH_CANCEL_CLIENT {
			end = cancelError(r)
		}
		w.finish(end)
		return false
	}
	if r.GetCreated() {
		select {
		case <-w.created: // answered already
		default:
			close(w.created)
		}
	}
	for _, f := range r.GetFileEvents() {
		ev := fileEventFrom(f)
		w.fragments = append(w.fragments, ev)
		w.fragmentBytes += eventBytes(ev)
	}
	for _, e := range r.GetEvents() {
		ev := eventFrom(e)
		w.fragments = append(w.fragments, ev)
		w.fragmentBytes += eventBytes(ev)
	}
	if len(w.fragments) == 0 || r.GetFragment() {
		return true
	}
	batch, bytes := w.fragments, w.fragmentBytes
	w.fragments, w.fragmentBytes = nil, 0
	if q := w.queued.Add(bytes); q > bytes && q > w.queueBound {
		return w.tooSlow(bytes)
	}
	select {
	case w.items <- batch:
		return true
	default:
		return w.tooSlow(bytes)
	}
}

// tooSlow ends a watcher whose reader fell behind the client's bound (the
// stream is shared, so the client does not stop reading it for one reader).
func (w *Watcher) tooSlow(bytes int64) bool {
	w.queued.Add(-bytes)
	e := newError("Watch", codes.ResourceExhausted, fmt.Sprintf(
		"the reader fell behind: %d bytes of events unread (bound %d)", w.queued.Load(), w.queueBound))
	e.kind = ErrSlowReader
	w.finish(e)
	return false
}

func eventBytes(e Event) int64 {
	if e.file != nil {
		return int64(len(e.file.Path) + len(e.file.NewPath) + 64)
	}
	n := int64(len(e.KV.Key) + len(e.KV.Value) + 64)
	if e.PrevKV != nil {
		n += int64(len(e.PrevKV.Key) + len(e.PrevKV.Value))
	}
	return n
}

func eventFrom(e *pb.WatchEvent) Event {
	ev := Event{Type: EventPut, KV: kvFrom(e.GetKv())}
	if e.GetType() == pb.WatchEvent_DELETE {
		ev.Type = EventDelete
	}
	if e.GetPrevKv() != nil {
		p := kvFrom(e.GetPrevKv())
		ev.PrevKV = &p
	}
	return ev
}

// cancelError is the error of a watcher the server ended: its cancel code
// decides the kind, never its text.
func cancelError(r *pb.WatchResponse) error {
	code := codes.Code(r.GetErrorCode())
	msg := r.GetCancelReason()
	var e *Error
	if end, ok := watchEnds[int32(r.GetCancelCode())]; ok { // COMPACTED, SUBVOLUME_DELETED, SLOW_READER
		e = newError("Watch", end.code, msg)
		e.kind = end.kind
		if end.kind == ErrCompacted {
			e.CompactRevision = r.GetCompactRevision()
		}
	} else { // REFUSED, SERVER: the error a unary call would have given
		if code == codes.OK {
			code = codes.Unknown
		}
		e = newError("Watch", code, msg)
	}
	e.Reason = r.GetErrorReason()
	return e
}

// next returns the next event, waiting under ctx; io.EOF at a clean end.
// Events delivered before the end come first.
func (w *Watcher) next(ctx context.Context) (Event, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed.Load() {
		return Event{}, io.EOF
	}
	for len(w.pending) == 0 {
		if w.end != nil {
			return Event{}, w.end
		}
		select {
		case b := <-w.items:
			w.take(b)
		case <-w.done:
			select {
			case b := <-w.items:
				w.take(b)
				continue
			default:
			}
			w.end = w.endErr
			if w.end == nil {
				w.end = io.EOF
			}
		case <-ctx.Done():
			return Event{}, wrap("Watch", ctx.Err())
		}
	}
	ev := w.pending[0]
	w.pending = w.pending[1:]
	return ev, nil
}

func (w *Watcher) take(batch []Event) {
	w.pending = batch
	var n int64
	for _, e := range batch {
		n += eventBytes(e)
	}
	w.queued.Add(-n)
}

// Next waits (under ctx, which bounds only this wait) for the next event.
// It returns io.EOF once the watcher ended cleanly (Close, or the Watch
// context ended), or the error that ended it: ErrCompacted,
// ErrSubvolumeDeleted, ErrSlowReader, ErrUnavailable (server stopping), ...
func (w *Watcher) Next(ctx context.Context) (Event, error) { return w.next(ctx) }

// Events iterates the watcher's events until it ends: a clean end (Close,
// the Watch context) stops the iteration; any other end is yielded as the
// last error. Breaking out of the loop leaves the watcher running.
func (w *Watcher) Events() iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for {
			ev, err := w.next(context.Background())
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// Revision is the latest store revision the server reported to the
// watcher (progress responses advance it while nothing changes).
func (w *Watcher) Revision() uint64 { return w.revision.Load() }

// Close ends the watcher (a cancel request on its stream; the stream
// itself closes with its last watcher); events not yet read are dropped
// and the iteration ends. Idempotent.
func (w *Watcher) Close() {
	if w.closed.Swap(true) {
		return
	}
	w.ctxMu.Lock()
	if w.stopCtx != nil {
		w.stopCtx()
	}
	w.ctxMu.Unlock()
	w.s.remove(w.ID, true)
	w.finish(nil)
}

// Compact drops the subvolume's history of revisions below revision
// (etcd's Compact): it stays readable and watchable from, older ones are
// ErrCompacted / ErrTooOld. It returns the subvolume's compact revision.
// Of the options only WithDurability applies.
func (s *Subvolume) Compact(ctx context.Context, revision uint64, opts ...WriteOption) (uint64, error) {
	if err := checkSubvolume("Compact", s.name); err != nil {
		return 0, err
	}
	m, err := s.db.kv.Compact(ctx, &pb.CompactRequest{Subvolume: s.name, Revision: revision,
		Durability: writeOpts(opts).durability.pb()})
	if err != nil {
		return 0, wrap("Compact", err)
	}
	return m.GetCompactRevision(), nil
}
