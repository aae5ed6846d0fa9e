package cowkv

// The KV.Watch streams a DB's watchers share.
//
// A stream carries up to maxWatchersPerStream watchers (the server's bound),
// each with a client-chosen id unique on the stream (ids are never reused,
// so a late response for a closed watcher is recognised and dropped). One
// goroutine per stream receives and hands each response to its watcher,
// never blocking: a watcher's reader that falls watchQueueBytes behind ends
// that watcher (ErrSlowReader) instead of stalling the others. Requests go
// out under sendMu. A stream closes with its last watcher; a stream that
// fails ends every watcher on it with the error, and the next Watch opens a
// new one.
//
// Invariants (under watchStream.mu):
//  1. users = len(watchers) (creating ones included) <= maxWatchersPerStream.
//  2. dead streams are not in watchMux.streams and take no new watcher.
//  3. A watcher is in watchers until its end is decided (server cancel,
//     Close, stream failure); its done channel closes after that.

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"

	"cowkv.dev/cowkv/internal/pb"
)

const (
	// maxWatchersPerStream is the server's bound (docs/api.md "Watch").
	maxWatchersPerStream = 1000
	// watchQueueBytes is the default bound of a watcher's unread events
	// (about; one larger revision is still handed over whole).
	watchQueueBytes = 16 << 20
	// watchQueueBatches bounds a watcher's unread deliveries.
	watchQueueBatches = 4096
)

// watchMux is a DB's set of watch streams.
type watchMux struct {
	queueBytes int64 // a watcher's bound of unread events (WithWatchQueueBytes)

	mu      sync.Mutex
	streams []*watchStream // live streams, in opening order
}

type watchStream struct {
	mux    *watchMux
	stream pb.KV_WatchClient
	cancel context.CancelFunc
	sendMu sync.Mutex

	mu       sync.Mutex
	watchers map[int64]*Watcher
	nextID   int64
	dead     bool
}

// stream returns a live stream with room for one more watcher, opening one
// if needed, and the id it reserved there; the caller must add a watcher
// with that id.
func (m *watchMux) stream(db *DB) (*watchStream, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.streams {
		s.mu.Lock()
		room := !s.dead && len(s.watchers) < maxWatchersPerStream
		id := int64(0)
		if room {
			s.nextID++
			id = s.nextID
			s.watchers[id] = nil // reserved until add
		}
		s.mu.Unlock()
		if room {
			return s, id, nil
		}
	}
	// The stream outlives any one watcher's context, and has no deadline.
	ctx, cancel := context.WithCancel(withoutDefaultTimeout(context.Background()))
	st, err := db.kv.Watch(ctx)
	if err != nil {
		cancel()
		return nil, 0, wrap("Watch", err)
	}
	s := &watchStream{mux: m, stream: st, cancel: cancel, watchers: map[int64]*Watcher{1: nil}, nextID: 1}
	m.streams = append(m.streams, s)
	go s.receive()
	return s, 1, nil
}

// add fills the slot id that stream reserved with w.
func (s *watchStream) add(w *Watcher, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.ID = id
	if s.dead { // failed meanwhile: the watcher ends at once
		w.finish(newError("Watch", codes.Unavailable, "the watch stream ended"))
		return
	}
	s.watchers[id] = w
}

// send writes one request; a failed stream shows on the receiving side.
func (s *watchStream) send(r *pb.WatchRequest) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	_ = s.stream.Send(r)
}

// remove drops a watcher (Close, or an end the receiver decided); with
// cancel, the server is told. The stream closes with its last watcher.
func (s *watchStream) remove(id int64, cancel bool) {
	s.mu.Lock()
	if _, ok := s.watchers[id]; !ok || s.dead {
		s.mu.Unlock()
		return
	}
	delete(s.watchers, id)
	last := len(s.watchers) == 0
	if last {
		s.dead = true
	}
	s.mu.Unlock()
	if last {
		s.mux.drop(s)
		s.cancel() // ends the stream; the receiver then finds no watcher
		return
	}
	if cancel {
		go s.send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{
			CancelRequest: &pb.WatchCancelRequest{WatchId: id}}})
	}
}

func (m *watchMux) drop(s *watchStream) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, x := range m.streams {
		if x == s {
			m.streams = append(m.streams[:i], m.streams[i+1:]...)
			return
		}
	}
}

// receive hands each response to its watcher until the stream ends.
func (s *watchStream) receive() {
	for {
		r, err := s.stream.Recv()
		if err != nil {
			s.fail(wrap("Watch", err))
			return
		}
		if r.GetWatchId() < 0 { // a progress answer for the whole stream: not asked for
			continue
		}
		s.mu.Lock()
		w := s.watchers[r.GetWatchId()]
		s.mu.Unlock()
		if w == nil {
			continue // closed by the client already, or not yet added
		}
		if !w.deliver(r) {
			// Ended by the server (nothing to cancel), or too slow (cancel).
			s.remove(w.ID, !r.GetCanceled())
		}
	}
}

// fail ends every watcher of a stream that ended under them.
func (s *watchStream) fail(err error) {
	s.mu.Lock()
	ws := s.watchers
	s.watchers = map[int64]*Watcher{}
	wasDead := s.dead
	s.dead = true
	s.mu.Unlock()
	if !wasDead {
		s.mux.drop(s)
	}
	s.cancel()
	for _, w := range ws {
		if w != nil {
			w.finish(err)
		}
	}
}
