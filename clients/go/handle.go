package cowkv

// Open handles (Files.Open, CreateTmpfile, CloseHandle): a file unlinked
// while open lives on (nlink 0) until its last handle closes; an O_TMPFILE
// gets a name with Link and is deleted if closed without one.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"time"

	"cowkv.dev/cowkv/internal/pb"
)

// FileHandle is a file open on the server, with a lease every call on it
// renews; one unused for longer is closed by the server (calls then fail
// with ErrNotFound, errno EBADF). Safe for concurrent use.
type FileHandle struct {
	s      *Subvolume
	Handle uint64        // the server's handle
	Ino    uint64        // the file's inode number
	Lease  time.Duration // the handle's lease
	Opened FileStat      // the attributes at open
}

func (s *Subvolume) handleFrom(op string, m *pb.OpenResponse, err error) (*FileHandle, error) {
	if err != nil {
		return nil, wrap(op, err)
	}
	return &FileHandle{s: s, Handle: m.GetHandle(), Ino: m.GetIno(),
		Lease: time.Duration(m.GetLeaseMs()) * time.Millisecond, Opened: statFrom(m.GetStat())}, nil
}

// Open opens a file on the server (lease 0 = the server's default, 30 s).
// While it is open, removing the file's last name does not delete it.
func (s *Subvolume) Open(ctx context.Context, path string, lease time.Duration) (*FileHandle, error) {
	if err := s.checkPaths("Open", "path", path); err != nil {
		return nil, err
	}
	m, err := s.db.files.Open(ctx, &pb.OpenRequest{Subvolume: s.name, Path: path,
		LeaseMs: uint64(lease.Milliseconds())})
	return s.handleFrom("Open", m, err)
}

// CreateTmpfile is O_TMPFILE: a new regular file without a name in
// directory dir (mode 0 = 0644), opened. h.Link names it; closing it
// without a name deletes it.
func (s *Subvolume) CreateTmpfile(ctx context.Context, dir string, mode uint32, lease time.Duration) (*FileHandle, error) {
	if err := s.checkPaths("CreateTmpfile", "dir_path", dir); err != nil {
		return nil, err
	}
	m, err := s.db.files.CreateTmpfile(ctx, &pb.CreateTmpfileRequest{Subvolume: s.name, DirPath: dir,
		Mode: mode, LeaseMs: uint64(lease.Milliseconds())})
	return s.handleFrom("CreateTmpfile", m, err)
}

// Stat returns the file's attributes now (nlink 0 once its last name went).
func (h *FileHandle) Stat(ctx context.Context) (FileStat, error) {
	m, err := h.s.db.files.Stat(ctx, &pb.StatRequest{Subvolume: h.s.name, Handle: h.Handle})
	if err != nil {
		return FileStat{}, wrap("Stat", err)
	}
	return statFrom(m), nil
}

// ReadAt reads length bytes from offset (0 = to EOF).
func (h *FileHandle) ReadAt(ctx context.Context, offset, length uint64) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := h.s.db.files.Read(ctx, &pb.ReadRequest{Subvolume: h.s.name, Handle: h.Handle, Offset: offset,
		Length: length})
	if err != nil {
		return nil, wrap("Read", err)
	}
	var buf bytes.Buffer
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return buf.Bytes(), nil
		}
		if err != nil {
			return nil, wrap("Read", err)
		}
		buf.Write(m.GetData())
	}
}

// WriteAt writes data at offset (in chunks of MaxWriteChunk on one Write
// stream) and returns the bytes written.
func (h *FileHandle) WriteAt(ctx context.Context, data []byte, offset uint64) (uint64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := h.s.db.files.Write(ctx)
	if err != nil {
		return 0, wrap("Write", err)
	}
	msg := &pb.WriteRequest{Subvolume: h.s.name, Handle: h.Handle, Offset: offset}
	for first := true; first || len(data) > 0; first = false {
		n := min(len(data), MaxWriteChunk)
		msg.Data, data = data[:n], data[n:]
		if st.Send(msg) != nil {
			break // the server ended the stream: CloseAndRecv has its status
		}
		msg = &pb.WriteRequest{}
	}
	m, err := st.CloseAndRecv()
	if err != nil {
		return 0, wrap("Write", err)
	}
	return m.GetBytesWritten(), nil
}

// Truncate sets the file's size.
func (h *FileHandle) Truncate(ctx context.Context, size uint64) (FileStat, error) {
	m, err := h.s.db.files.Truncate(ctx, &pb.TruncateRequest{Subvolume: h.s.name, Handle: h.Handle, Size: size})
	if err != nil {
		return FileStat{}, wrap("Truncate", err)
	}
	return statFrom(m), nil
}

// Fsync makes the file durable (also one without a name).
func (h *FileHandle) Fsync(ctx context.Context, datasync bool) error {
	_, err := h.s.db.files.Fsync(ctx, &pb.FsyncRequest{Subvolume: h.s.name, Handle: h.Handle, Datasync: datasync})
	return wrap("Fsync", err)
}

// Link gives the file the name newPath (linkat): an O_TMPFILE's first
// name; a file whose names were all removed is ErrNotFound (ENOENT).
func (h *FileHandle) Link(ctx context.Context, newPath string) (FileStat, error) {
	if err := h.s.checkPaths("Link", "new_path", newPath); err != nil {
		return FileStat{}, err
	}
	m, err := h.s.db.files.Link(ctx, &pb.LinkRequest{Subvolume: h.s.name, Handle: h.Handle, NewPath: newPath})
	if err != nil {
		return FileStat{}, wrap("Link", err)
	}
	return statFrom(m), nil
}

// Close closes the handle; the last one of a file without a name deletes it.
func (h *FileHandle) Close(ctx context.Context) error {
	_, err := h.s.db.files.CloseHandle(ctx, &pb.CloseRequest{Handle: h.Handle})
	return wrap("CloseHandle", err)
}
