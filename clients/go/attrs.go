package cowkv

// setattr, extended attributes and range fsync (docs/api.md, "Files";
// proto/cowkv/v1/files.proto SetAttr, SetXattr, GetXattr, ListXattrs,
// RemoveXattr, Fsync's offset and length).

import (
	"context"
	"time"

	"cowkv.dev/cowkv/internal/pb"
)

// AttrChange names the attributes SetAttr changes; a nil field is kept.
// AtimeNow / MtimeNow set that time to the server's clock (utimensat's
// UTIME_NOW) and win over Atime / Mtime.
type AttrChange struct {
	Mode     *uint32 // permission bits (07777; EINVAL beyond)
	UID, GID *uint32
	Size     *uint64 // a truncate (regular files)
	Atime    *time.Time
	Mtime    *time.Time
	AtimeNow bool
	MtimeNow bool
}

func (c AttrChange) request(sv, path string) *pb.SetAttrRequest {
	req := &pb.SetAttrRequest{Subvolume: sv, Path: path}
	set := func(f pb.SetAttrField) { req.Fields |= uint32(f) }
	if c.Mode != nil {
		set(pb.SetAttrField_SET_ATTR_MODE)
		req.Mode = *c.Mode
	}
	if c.UID != nil {
		set(pb.SetAttrField_SET_ATTR_UID)
		req.Uid = *c.UID
	}
	if c.GID != nil {
		set(pb.SetAttrField_SET_ATTR_GID)
		req.Gid = *c.GID
	}
	if c.Size != nil {
		set(pb.SetAttrField_SET_ATTR_SIZE)
		req.Size = *c.Size
	}
	switch {
	case c.AtimeNow:
		set(pb.SetAttrField_SET_ATTR_ATIME_NOW)
	case c.Atime != nil:
		set(pb.SetAttrField_SET_ATTR_ATIME)
		req.AtimeNs = c.Atime.UnixNano()
	}
	switch {
	case c.MtimeNow:
		set(pb.SetAttrField_SET_ATTR_MTIME_NOW)
	case c.Mtime != nil:
		set(pb.SetAttrField_SET_ATTR_MTIME)
		req.MtimeNs = c.Mtime.UnixNano()
	}
	return req
}

// SetAttr changes the attributes c names in one call (chmod, chown,
// truncate and utimensat) and returns them afterwards; ctime becomes now
// when anything changes. An empty AttrChange changes nothing.
func (s *Subvolume) SetAttr(ctx context.Context, path string, c AttrChange) (FileStat, error) {
	if err := s.checkPaths("SetAttr", "path", path); err != nil {
		return FileStat{}, err
	}
	m, err := s.db.files.SetAttr(ctx, c.request(s.name, path))
	if err != nil {
		return FileStat{}, wrap("SetAttr", err)
	}
	return statFrom(m), nil
}

// Chmod sets the permission bits (at most 07777).
func (s *Subvolume) Chmod(ctx context.Context, path string, mode uint32) (FileStat, error) {
	return s.SetAttr(ctx, path, AttrChange{Mode: &mode})
}

// Chown sets the owner, as os.Chown: -1 keeps that id.
func (s *Subvolume) Chown(ctx context.Context, path string, uid, gid int) (FileStat, error) {
	var c AttrChange
	if uid >= 0 {
		u := uint32(uid)
		c.UID = &u
	}
	if gid >= 0 {
		g := uint32(gid)
		c.GID = &g
	}
	return s.SetAttr(ctx, path, c)
}

// Chtimes sets the access and modification times, as os.Chtimes.
func (s *Subvolume) Chtimes(ctx context.Context, path string, atime, mtime time.Time) (FileStat, error) {
	return s.SetAttr(ctx, path, AttrChange{Atime: &atime, Mtime: &mtime})
}

// XattrFlags are setxattr(2)'s flags.
type XattrFlags uint32

const (
	XattrCreate  XattrFlags = 1 // ErrAlreadyExists (EEXIST) if the name is set
	XattrReplace XattrFlags = 2 // ErrNotFound (ENODATA) if the name is not set
)

// SetXattr sets an extended attribute ("user.x"); flags 0, XattrCreate or
// XattrReplace.
func (s *Subvolume) SetXattr(ctx context.Context, path, name string, value []byte, flags XattrFlags) error {
	if err := s.checkPaths("SetXattr", "path", path); err != nil {
		return err
	}
	_, err := s.db.files.SetXattr(ctx, &pb.SetXattrRequest{Subvolume: s.name, Path: path, Name: name,
		Value: value, Flags: uint32(flags)})
	return wrap("SetXattr", err)
}

// GetXattr reads an extended attribute; ErrNotFound (ENODATA) if it is not set.
func (s *Subvolume) GetXattr(ctx context.Context, path, name string) ([]byte, error) {
	if err := s.checkPaths("GetXattr", "path", path); err != nil {
		return nil, err
	}
	m, err := s.db.files.GetXattr(ctx, &pb.GetXattrRequest{Subvolume: s.name, Path: path, Name: name})
	if err != nil {
		return nil, wrap("GetXattr", err)
	}
	return m.GetValue(), nil
}

// ListXattrs returns the names of a file's extended attributes, sorted.
func (s *Subvolume) ListXattrs(ctx context.Context, path string) ([]string, error) {
	if err := s.checkPaths("ListXattrs", "path", path); err != nil {
		return nil, err
	}
	m, err := s.db.files.ListXattrs(ctx, &pb.ListXattrsRequest{Subvolume: s.name, Path: path})
	if err != nil {
		return nil, wrap("ListXattrs", err)
	}
	return m.GetNames(), nil
}

// RemoveXattr removes an extended attribute; ErrNotFound (ENODATA) if it is
// not set.
func (s *Subvolume) RemoveXattr(ctx context.Context, path, name string) error {
	if err := s.checkPaths("RemoveXattr", "path", path); err != nil {
		return err
	}
	_, err := s.db.files.RemoveXattr(ctx, &pb.RemoveXattrRequest{Subvolume: s.name, Path: path, Name: name})
	return wrap("RemoveXattr", err)
}

// FsyncRange is a range fsync (sync_file_range): at least the data of
// [offset, offset+length) is durable when it returns (length 0 = to EOF;
// the server syncs the whole file today).
func (s *Subvolume) FsyncRange(ctx context.Context, path string, datasync bool, offset, length uint64) error {
	if err := s.checkPaths("Fsync", "path", path); err != nil {
		return err
	}
	_, err := s.db.files.Fsync(ctx, &pb.FsyncRequest{Subvolume: s.name, Path: path, Datasync: datasync,
		Offset: offset, Length: length})
	return wrap("Fsync", err)
}

// FallocateMode is fallocate(2)'s mode (Linux's FALLOC_FL_* values).
type FallocateMode uint32

const (
	FallocKeepSize  FallocateMode = 0x01 // keep the size (the range may lie past EOF)
	FallocPunchHole FallocateMode = 0x02 // make the range a hole; needs FallocKeepSize
	FallocZeroRange FallocateMode = 0x10 // make the range read as zeros (preallocated)
)

// Fallocate is fallocate(2) on a regular file: with mode 0 the range's
// holes get preallocated extents that read as zeros (Fiemap's
// ExtentUnwritten) and the file grows to offset+length. FallocPunchHole
// with FallocZeroRange, or length 0, is ErrInvalidArgument (EINVAL); a full
// device ErrNoSpace with nothing changed. It returns the file's attributes.
func (s *Subvolume) Fallocate(ctx context.Context, path string, offset, length uint64, mode FallocateMode) (FileStat, error) {
	if err := s.checkPaths("Fallocate", "path", path); err != nil {
		return FileStat{}, err
	}
	m, err := s.db.files.Fallocate(ctx, &pb.FallocateRequest{Subvolume: s.name, Path: path, Mode: uint32(mode),
		Offset: offset, Length: length})
	if err != nil {
		return FileStat{}, wrap("Fallocate", err)
	}
	return statFrom(m), nil
}
