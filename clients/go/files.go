package cowkv

import (
	"bytes"
	"context"
	"errors"
	"io"
	"time"

	"cowkv.dev/cowkv/internal/pb"
)

// FileKind is what an inode is.
type FileKind int

const (
	KindRegular FileKind = iota
	KindDirectory
	KindSymlink
)

func (k FileKind) String() string {
	switch k {
	case KindDirectory:
		return "directory"
	case KindSymlink:
		return "symlink"
	}
	return "regular"
}

// FileStat is the attributes of one inode.
type FileStat struct {
	Ino                        uint64 // the root directory is 256
	Kind                       FileKind
	Mode                       uint32 // permission bits (07777)
	Nlink                      uint32
	Size                       uint64
	Bytes                      uint64 // data bytes referenced (holes excluded)
	UID, GID                   uint32
	Atime, Mtime, Ctime, Btime time.Time
	Generation, Transid        uint64
}

func statFrom(m *pb.FileStat) FileStat {
	return FileStat{Ino: m.GetIno(), Kind: FileKind(m.GetKind()), Mode: m.GetMode(), Nlink: m.GetNlink(),
		Size: m.GetSize(), Bytes: m.GetBytes(), UID: m.GetUid(), GID: m.GetGid(),
		Atime: time.Unix(0, m.GetAtimeNs()), Mtime: time.Unix(0, m.GetMtimeNs()),
		Ctime: time.Unix(0, m.GetCtimeNs()), Btime: time.Unix(0, m.GetBtimeNs()),
		Generation: m.GetGeneration(), Transid: m.GetTransid()}
}

func (s *Subvolume) checkPaths(op string, fields ...string) error {
	if err := checkSubvolume(op, s.name); err != nil {
		return err
	}
	for i := 0; i+1 < len(fields); i += 2 {
		if err := checkPath(op, fields[i], fields[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// Stat returns the attributes of a file, directory or symlink (never followed).
func (s *Subvolume) Stat(ctx context.Context, path string) (FileStat, error) {
	if err := s.checkPaths("Stat", "path", path); err != nil {
		return FileStat{}, err
	}
	m, err := s.db.files.Stat(ctx, &pb.StatRequest{Subvolume: s.name, Path: path})
	if err != nil {
		return FileStat{}, wrap("Stat", err)
	}
	return statFrom(m), nil
}

// Mkdir creates a directory (mode 0 = 0755); the parent must exist.
func (s *Subvolume) Mkdir(ctx context.Context, path string, mode uint32) (FileStat, error) {
	if err := s.checkPaths("Mkdir", "path", path); err != nil {
		return FileStat{}, err
	}
	m, err := s.db.files.Mkdir(ctx, &pb.MkdirRequest{Subvolume: s.name, Path: path, Mode: mode})
	if err != nil {
		return FileStat{}, wrap("Mkdir", err)
	}
	return statFrom(m), nil
}

// CreateFile creates an empty regular file (mode 0 = 0644); ErrAlreadyExists
// (EEXIST) if the name is taken.
func (s *Subvolume) CreateFile(ctx context.Context, path string, mode uint32) (FileStat, error) {
	if err := s.checkPaths("CreateFile", "path", path); err != nil {
		return FileStat{}, err
	}
	m, err := s.db.files.Create(ctx, &pb.CreateFileRequest{Subvolume: s.name, Path: path, Mode: mode})
	if err != nil {
		return FileStat{}, wrap("CreateFile", err)
	}
	return statFrom(m), nil
}

// DirEntry is one directory entry.
type DirEntry struct {
	Name   string
	Ino    uint64
	Kind   FileKind
	Cookie uint64
}

// ReadDir lists a directory in creation order, fetching pages of PageSize
// entries (default: the server's limit) until the end.
func (s *Subvolume) ReadDir(ctx context.Context, path string, opts ...RangeOption) ([]DirEntry, error) {
	if err := s.checkPaths("ReadDir", "path", path); err != nil {
		return nil, err
	}
	o := rangeOpts(opts)
	var out []DirEntry
	var cookie uint64
	for {
		m, err := s.db.files.ReadDir(ctx, &pb.ReadDirRequest{Subvolume: s.name, Path: path, Cookie: cookie, Limit: o.pageSize})
		if err != nil {
			return nil, wrap("ReadDir", err)
		}
		for _, e := range m.GetEntries() {
			out = append(out, DirEntry{Name: e.GetName(), Ino: e.GetIno(), Kind: FileKind(e.GetKind()), Cookie: e.GetCookie()})
		}
		if !m.GetMore() {
			return out, nil
		}
		cookie = m.GetNextCookie()
	}
}

// ReadAt reads length bytes of a regular file from offset (length 0 = to
// EOF); it stops early at EOF. Holes read as zeros.
func (s *Subvolume) ReadAt(ctx context.Context, path string, offset, length uint64) ([]byte, error) {
	if err := s.checkPaths("Read", "path", path); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := s.db.files.Read(ctx, &pb.ReadRequest{Subvolume: s.name, Path: path, Offset: offset, Length: length})
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

// ReadFile reads a whole regular file.
func (s *Subvolume) ReadFile(ctx context.Context, path string) ([]byte, error) {
	return s.ReadAt(ctx, path, 0, 0)
}

// WriteOptions of WriteFile and WriteFrom.
type FileWriteOption func(*fileWriteOptions)

type fileWriteOptions struct {
	offset   uint64
	create   bool
	mode     uint32
	truncate bool
}

// At writes at this offset (default 0).
func At(offset uint64) FileWriteOption { return func(o *fileWriteOptions) { o.offset = offset } }

// Create creates the file if it does not exist, with mode (0 = 0644).
func Create(mode uint32) FileWriteOption {
	return func(o *fileWriteOptions) { o.create, o.mode = true, mode }
}

// Truncate cuts the file to the write's offset before writing.
func Truncate() FileWriteOption { return func(o *fileWriteOptions) { o.truncate = true } }

// WriteFile writes data into a regular file, streamed in 4 MiB chunks (each
// chunk is atomic, the whole write is not). It returns the bytes written
// and the file's attributes afterwards.
func (s *Subvolume) WriteFile(ctx context.Context, path string, data []byte, opts ...FileWriteOption) (uint64, FileStat, error) {
	return s.WriteFrom(ctx, path, bytes.NewReader(data), opts...)
}

// WriteFrom streams r into a regular file, in chunks of at most 4 MiB.
func (s *Subvolume) WriteFrom(ctx context.Context, path string, r io.Reader, opts ...FileWriteOption) (uint64, FileStat, error) {
	if err := s.checkPaths("Write", "path", path); err != nil {
		return 0, FileStat{}, err
	}
	var o fileWriteOptions
	for _, f := range opts {
		f(&o)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := s.db.files.Write(ctx)
	if err != nil {
		return 0, FileStat{}, wrap("Write", err)
	}
	first := &pb.WriteRequest{Subvolume: s.name, Path: path, Offset: o.offset, Create: o.create,
		Mode: o.mode, Truncate: o.truncate}
	buf := make([]byte, MaxWriteChunk)
	for sent := false; ; {
		n, rerr := io.ReadFull(r, buf)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			return 0, FileStat{}, rerr
		}
		if n > 0 || !sent {
			msg := &pb.WriteRequest{Data: append([]byte(nil), buf[:n]...)}
			if !sent {
				first.Data, msg = msg.Data, first
			}
			if err := st.Send(msg); err != nil {
				break // the server ended the stream: CloseAndRecv has its status
			}
			sent = true
		}
		if rerr != nil {
			break
		}
	}
	m, err := st.CloseAndRecv()
	if err != nil {
		return 0, FileStat{}, wrap("Write", err)
	}
	return m.GetBytesWritten(), statFrom(m.GetStat()), nil
}

// SetSize sets a regular file's size (Files.Truncate: cuts, or extends
// with a hole).
func (s *Subvolume) SetSize(ctx context.Context, path string, size uint64) (FileStat, error) {
	if err := s.checkPaths("Truncate", "path", path); err != nil {
		return FileStat{}, err
	}
	m, err := s.db.files.Truncate(ctx, &pb.TruncateRequest{Subvolume: s.name, Path: path, Size: size})
	if err != nil {
		return FileStat{}, wrap("Truncate", err)
	}
	return statFrom(m), nil
}

// RenameFlags are renameat2's flags.
type RenameFlags uint32

const (
	RenameNoReplace RenameFlags = 1 // fail with EEXIST if `to` exists
	RenameExchange  RenameFlags = 2 // swap `from` and `to`
)

// Rename renames (moves) a name; an existing `to` is replaced unless flags
// say otherwise.
func (s *Subvolume) Rename(ctx context.Context, from, to string, flags RenameFlags) error {
	if err := s.checkPaths("Rename", "from", from, "to", to); err != nil {
		return err
	}
	if flags&RenameNoReplace != 0 && flags&RenameExchange != 0 {
		return invalid("Rename", "EINVAL: flags: NOREPLACE and EXCHANGE together")
	}
	_, err := s.db.files.Rename(ctx, &pb.RenameRequest{Subvolume: s.name, From: from, To: to, Flags: uint32(flags)})
	return wrap("Rename", err)
}

// Link adds a hard link newPath to the file at existing.
func (s *Subvolume) Link(ctx context.Context, existing, newPath string) (FileStat, error) {
	if err := s.checkPaths("Link", "existing", existing, "new_path", newPath); err != nil {
		return FileStat{}, err
	}
	m, err := s.db.files.Link(ctx, &pb.LinkRequest{Subvolume: s.name, Existing: existing, NewPath: newPath})
	if err != nil {
		return FileStat{}, wrap("Link", err)
	}
	return statFrom(m), nil
}

// Symlink creates a symlink at path holding target (never resolved).
func (s *Subvolume) Symlink(ctx context.Context, target, path string) (FileStat, error) {
	if err := s.checkPaths("Symlink", "path", path); err != nil {
		return FileStat{}, err
	}
	if len(target) == 0 || len(target) > maxSymlinkBytes {
		return FileStat{}, invalid("Symlink", "EINVAL: target: a symlink target is 1..%d bytes, not %d", maxSymlinkBytes, len(target))
	}
	m, err := s.db.files.Symlink(ctx, &pb.SymlinkRequest{Subvolume: s.name, Target: target, Path: path})
	if err != nil {
		return FileStat{}, wrap("Symlink", err)
	}
	return statFrom(m), nil
}

// ReadLink returns a symlink's target.
func (s *Subvolume) ReadLink(ctx context.Context, path string) (string, error) {
	if err := s.checkPaths("ReadLink", "path", path); err != nil {
		return "", err
	}
	m, err := s.db.files.ReadLink(ctx, &pb.ReadLinkRequest{Subvolume: s.name, Path: path})
	if err != nil {
		return "", wrap("ReadLink", err)
	}
	return m.GetTarget(), nil
}

// Unlink removes a name of a file or symlink.
func (s *Subvolume) Unlink(ctx context.Context, path string) error {
	if err := s.checkPaths("Unlink", "path", path); err != nil {
		return err
	}
	_, err := s.db.files.Unlink(ctx, &pb.UnlinkRequest{Subvolume: s.name, Path: path})
	return wrap("Unlink", err)
}

// Rmdir removes an empty directory.
func (s *Subvolume) Rmdir(ctx context.Context, path string) error {
	if err := s.checkPaths("Rmdir", "path", path); err != nil {
		return err
	}
	_, err := s.db.files.Rmdir(ctx, &pb.RmdirRequest{Subvolume: s.name, Path: path})
	return wrap("Rmdir", err)
}

// Fsync makes a file (and, for a directory, its entries) durable; datasync
// is fdatasync.
func (s *Subvolume) Fsync(ctx context.Context, path string, datasync bool) error {
	if err := s.checkPaths("Fsync", "path", path); err != nil {
		return err
	}
	_, err := s.db.files.Fsync(ctx, &pb.FsyncRequest{Subvolume: s.name, Path: path, Datasync: datasync})
	return wrap("Fsync", err)
}

// CloneRange names the ranges of a reflink clone.
type CloneRange struct {
	Src       string
	SrcOffset uint64
	Dst       string
	DstOffset uint64
	Length    uint64 // 0 = to the source's EOF
}

// Clone makes a range of Dst share the extents of a range of Src
// (copy-on-write; no data is copied).
func (s *Subvolume) Clone(ctx context.Context, r CloneRange) error {
	if err := s.checkPaths("Clone", "src_path", r.Src, "dst_path", r.Dst); err != nil {
		return err
	}
	_, err := s.db.files.Clone(ctx, &pb.CloneRequest{Subvolume: s.name, SrcPath: r.Src, SrcOffset: r.SrcOffset,
		DstPath: r.Dst, DstOffset: r.DstOffset, Length: r.Length})
	return wrap("Clone", err)
}

// ExtentFlags are Linux's FIEMAP_EXTENT_* bits.
type ExtentFlags uint32

const (
	ExtentLast       ExtentFlags = 0x1
	ExtentNotAligned ExtentFlags = 0x100
	ExtentInline     ExtentFlags = 0x200
	ExtentUnwritten  ExtentFlags = 0x800 // preallocated (Fallocate): reads as zeros
	ExtentShared     ExtentFlags = 0x2000
)

// Extent is one extent of a file.
type Extent struct {
	Logical  uint64 // file offset
	Physical uint64 // device byte address (0 for inline data)
	Length   uint64
	Flags    ExtentFlags
}

// Shared reports whether the extent is shared with another file or snapshot.
func (e Extent) Shared() bool { return e.Flags&ExtentShared != 0 }

// Fiemap returns the extents holding [offset, offset+length) of a file
// (length 0 = to EOF), following the server's pages.
func (s *Subvolume) Fiemap(ctx context.Context, path string, offset, length uint64) ([]Extent, error) {
	if err := s.checkPaths("Fiemap", "path", path); err != nil {
		return nil, err
	}
	var out []Extent
	end := offset + length
	for {
		m, err := s.db.files.Fiemap(ctx, &pb.FiemapRequest{Subvolume: s.name, Path: path, Offset: offset, Length: length})
		if err != nil {
			return nil, wrap("Fiemap", err)
		}
		for _, e := range m.GetExtents() {
			out = append(out, Extent{Logical: e.GetLogical(), Physical: e.GetPhysical(), Length: e.GetLength(), Flags: ExtentFlags(e.GetFlags())})
		}
		if !m.GetMore() || len(m.GetExtents()) == 0 {
			return out, nil
		}
		last := out[len(out)-1]
		offset = last.Logical + last.Length
		if length != 0 {
			if offset >= end {
				return out, nil
			}
			length = end - offset
		}
	}
}
