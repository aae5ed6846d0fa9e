package cowkv

// Send and receive of read-only snapshots (docs/api.md "Subvolumes" and
// "Send and receive"; docs/operations.md "Backup and restore"). A send
// stream is bytes in order: SendStream is an io.Reader over them, Receive
// reads any io.Reader in bounded pieces, so a stream piped from one
// server to another never sits whole in memory.

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"cowkv.dev/cowkv/internal/pb"
)

// receiveChunkBytes is the size of one ReceiveRequest chunk (the server
// takes at most 4 MiB per message).
const receiveChunkBytes = 1 << 20

// SendStats is what one Send did (its last message).
type SendStats struct {
	Records, Bytes, Items, Deletes, Clones, DataBytes, NodesRead, SubtreesSkipped uint64
}

// SendOption sets an option of Send.
type SendOption func(*pb.SendRequest)

// SendParent makes the stream incremental: only the difference from parent,
// an older read-only snapshot of the same lineage the receiver holds.
func SendParent(parent string) SendOption {
	return func(r *pb.SendRequest) { r.Parent = parent }
}

// SendResumeToken sends the rest of the stream a resumable receive stopped
// in (a PartialReceive's Token at the receiver). The snapshot may then be ""
// (found from the token). A damaged token is ErrInvalidArgument (reason
// RESUME_TOKEN); one whose snapshots are not here is ErrNotFound
// (RESUME_MISMATCH).
func SendResumeToken(token string) SendOption {
	return func(r *pb.SendRequest) { r.ResumeToken = token }
}

// SendStream is a send stream being read: Next returns its chunks in order
// and io.EOF after the last; Read makes it an io.Reader. Read it to the end
// or Close it (which cancels the call).
type SendStream struct {
	stream grpc.ServerStreamingClient[pb.SendResponse]
	cancel context.CancelFunc
	rest   []byte // unread part of the current chunk (Read)
	stats  *SendStats
	err    error // sticky: io.EOF at the end, else the stream's error
}

// Send streams the read-only snapshot (the whole of it, or with SendParent
// its difference from the parent). ErrNotFound for an unknown snapshot or
// parent, ErrFailedPrecondition for a writable one or two of different
// lineages. Errors of the stream itself come from Next / Read.
func (db *DB) Send(ctx context.Context, snapshot string, opts ...SendOption) (*SendStream, error) {
	req := &pb.SendRequest{Snapshot: snapshot}
	for _, o := range opts {
		o(req)
	}
	if req.ResumeToken == "" || snapshot != "" {
		if err := checkName("Send", "snapshot", snapshot); err != nil {
			return nil, err
		}
	}
	if req.Parent != "" {
		if err := checkName("Send", "parent", req.Parent); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	s, err := db.subv.Send(ctx, req)
	if err != nil {
		cancel()
		return nil, wrap("Send", err)
	}
	return &SendStream{stream: s, cancel: cancel}, nil
}

// Next returns the next chunk of the stream (never empty), io.EOF after the
// last, or the call's error. The chunk is the caller's.
func (s *SendStream) Next() ([]byte, error) {
	for s.err == nil {
		m, err := s.stream.Recv()
		if err != nil {
			s.finish(err)
			break
		}
		if st := m.GetStats(); st != nil {
			s.stats = &SendStats{Records: st.GetRecords(), Bytes: st.GetBytes(), Items: st.GetItems(),
				Deletes: st.GetDeletes(), Clones: st.GetClones(), DataBytes: st.GetDataBytes(),
				NodesRead: st.GetNodesRead(), SubtreesSkipped: st.GetSubtreesSkipped()}
		}
		if len(m.GetChunk()) > 0 {
			return m.GetChunk(), nil
		}
	}
	return nil, s.err
}

// finish ends the stream with err; a server that closed the stream without
// its stats message cut it short.
func (s *SendStream) finish(err error) {
	switch {
	case !errors.Is(err, io.EOF):
		s.err = wrap("Send", err)
	case s.stats == nil:
		s.err = newError("Send", codes.Internal, "stream ended without its stats message")
	default:
		s.err = io.EOF
	}
	s.cancel()
}

// Read implements io.Reader over the stream's bytes.
func (s *SendStream) Read(p []byte) (int, error) {
	if len(s.rest) == 0 {
		chunk, err := s.Next()
		if err != nil {
			return 0, err
		}
		s.rest = chunk
	}
	n := copy(p, s.rest)
	s.rest = s.rest[n:]
	return n, nil
}

// Stats is what the send did, once Next or Read returned io.EOF (else nil).
func (s *SendStream) Stats() *SendStats { return s.stats }

// Close cancels the call if the stream was not read to its end.
func (s *SendStream) Close() error {
	if s.err == nil {
		s.err = newError("Send", codes.Canceled, "send stream closed")
	}
	s.cancel()
	return nil
}

// SendTo writes the whole send stream of snapshot to w (a file, a pipe)
// and returns the send's stats. On error w holds a prefix of the stream.
func (db *DB) SendTo(ctx context.Context, w io.Writer, snapshot string, opts ...SendOption) (SendStats, error) {
	s, err := db.Send(ctx, snapshot, opts...)
	if err != nil {
		return SendStats{}, err
	}
	defer s.Close()
	for {
		chunk, err := s.Next()
		if errors.Is(err, io.EOF) {
			return *s.stats, nil
		}
		if err != nil {
			return SendStats{}, err
		}
		if _, err := w.Write(chunk); err != nil {
			return SendStats{}, err
		}
	}
}

// ReceiveResult is what one Receive made.
type ReceiveResult struct {
	Name                                              string // the subvolume made (a dry run: the name it would have had)
	ID                                                uint64 // its id; 0 for a dry run
	Incremental                                       bool   // the stream was incremental
	Parent                                            string // the local parent an incremental stream applied to
	Records, Bytes, Items, Deletes, Clones, DataBytes uint64
}

// ReceiveOption sets an option of Receive.
type ReceiveOption func(*pb.ReceiveRequest)

// ReceiveName names the new subvolume (default: the name the snapshot had
// at the sender). ErrAlreadyExists if taken.
func ReceiveName(name string) ReceiveOption {
	return func(r *pb.ReceiveRequest) { r.Name = name }
}

// ReceiveDryRun checks the stream (framing, checksums, digest, parent
// present) and writes nothing.
func ReceiveDryRun() ReceiveOption { return func(r *pb.ReceiveRequest) { r.DryRun = true } }

// ReceiveResumable keeps what arrived if the receive fails or is cut, as a
// partial receive (PartialReceives) that a continuation stream (Send with
// SendResumeToken) completes. Continuation streams are always resumable.
func ReceiveResumable() ReceiveOption { return func(r *pb.ReceiveRequest) { r.Resumable = true } }

// Receive reads a send stream from r (to io.EOF, 1 MiB at a time) into a
// new read-only subvolume, which appears only once the whole stream has
// arrived and verified. Errors: ErrDataLoss (reason STREAM_CORRUPT) for a
// damaged or truncated stream, ErrNotFound / ErrFailedPrecondition (reason
// PARENT_MISMATCH) for an incremental stream whose parent is missing or
// differs, ErrAlreadyExists for a taken name (reason PARTIAL_RECEIVE for a
// partial receive's name), RESUME_MISMATCH for a continuation that does not
// fit. An error reading r cancels the call and is returned as it is; a
// resumable receive then keeps what the server applied.
func (db *DB) Receive(ctx context.Context, r io.Reader, opts ...ReceiveOption) (ReceiveResult, error) {
	first := &pb.ReceiveRequest{}
	for _, o := range opts {
		o(first)
	}
	if first.Name != "" {
		if err := checkName("Receive", "name", first.Name); err != nil {
			return ReceiveResult{}, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := db.subv.Receive(ctx)
	if err != nil {
		return ReceiveResult{}, wrap("Receive", err)
	}
	if err := uploadChunks(stream, r, first); err != nil {
		return ReceiveResult{}, err
	}
	m, err := stream.CloseAndRecv()
	if err != nil {
		return ReceiveResult{}, wrap("Receive", err)
	}
	return ReceiveResult{Name: m.GetName(), ID: m.GetId(), Incremental: m.GetIncremental(),
		Parent: m.GetParent(), Records: m.GetRecords(), Bytes: m.GetBytes(), Items: m.GetItems(),
		Deletes: m.GetDeletes(), Clones: m.GetClones(), DataBytes: m.GetDataBytes()}, nil
}

// uploadChunks sends r's bytes, the first message carrying first's options.
// An error from r is returned as it is (the caller's cancel then cuts the
// call); a send the server refused returns nil so that CloseAndRecv reports
// the server's status.
func uploadChunks(stream grpc.ClientStreamingClient[pb.ReceiveRequest, pb.ReceiveResponse],
	r io.Reader, first *pb.ReceiveRequest) error {
	buf := make([]byte, receiveChunkBytes)
	msg := first
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 || msg == first {
			msg.Chunk = buf[:n]
			if err := stream.Send(msg); err != nil {
				return nil // io.EOF: the server ended the call; CloseAndRecv has why
			}
			msg = &pb.ReceiveRequest{}
		}
		switch {
		case rerr == nil:
		case errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF):
			return nil
		default:
			return rerr
		}
	}
}

// PartialReceive is a resumable receive that stopped before its end.
type PartialReceive struct {
	Name       string // the subvolume it will become
	Token      string // give it to Send (SendResumeToken) at the sender
	Records    uint64 // records applied so far
	Bytes      uint64 // stream bytes applied so far
	UUID       string // the snapshot being received
	Generation uint64 // the snapshot's generation at the sender
	ParentUUID string // its parent (incremental streams), else ""
	InUse      bool   // a receive is writing to it now
}

// PartialReceives lists the partial receives kept by this server.
func (db *DB) PartialReceives(ctx context.Context) ([]PartialReceive, error) {
	m, err := db.subv.PartialReceives(ctx, &pb.PartialReceivesRequest{})
	if err != nil {
		return nil, wrap("PartialReceives", err)
	}
	out := make([]PartialReceive, 0, len(m.GetPartial()))
	for _, p := range m.GetPartial() {
		out = append(out, PartialReceive{Name: p.GetName(), Token: p.GetToken(), Records: p.GetRecords(),
			Bytes: p.GetBytes(), UUID: p.GetUuid(), Generation: p.GetGeneration(),
			ParentUUID: p.GetParentUuid(), InUse: p.GetInUse()})
	}
	return out, nil
}

// AbortReceive drops the partial receive name. ErrNotFound (reason
// RESUME_MISMATCH) if there is none, ErrFailedPrecondition (reason
// PARTIAL_RECEIVE) while a receive writes to it.
func (db *DB) AbortReceive(ctx context.Context, name string) error {
	if err := checkName("AbortReceive", "name", name); err != nil {
		return err
	}
	_, err := db.subv.AbortReceive(ctx, &pb.AbortReceiveRequest{Name: name})
	return wrap("AbortReceive", err)
}

// Digest is the SHA-256 (64 hex digits) over a subvolume's items and file
// data: equal for a sent snapshot and its received copy.
func (db *DB) Digest(ctx context.Context, name string) (string, error) {
	if err := checkName("Digest", "name", name); err != nil {
		return "", err
	}
	m, err := db.subv.Digest(ctx, &pb.DigestSubvolumeRequest{Name: name})
	if err != nil {
		return "", wrap("Digest", err)
	}
	return m.GetSha256(), nil
}
