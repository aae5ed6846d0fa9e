// The file tree of a subvolume (btrfs's fs tree): Files and the values it
// returns. Subvolume::files() (store.h) hands it out.
#ifndef COWKV_INCLUDE_COWKV_FILES_H_
#define COWKV_INCLUDE_COWKV_FILES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cowkv {

class StoreImpl;

inline constexpr uint64_t kRootInode = 256;
enum class FileKind { kRegular, kDirectory, kSymlink };

struct FileStat {
  uint64_t ino = 0;
  FileKind kind = FileKind::kRegular;
  uint32_t mode = 0;   // permission bits (07777)
  uint32_t nlink = 0;  // names (directories: 1)
  uint64_t size = 0;   // bytes (directories: 2 x the bytes of their names, as btrfs)
  uint64_t bytes = 0;  // bytes of data the file references (holes excluded)
  uint32_t uid = 0;
  uint32_t gid = 0;
  int64_t atime_ns = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  int64_t btime_ns = 0;     // creation
  uint64_t generation = 0;  // engine generation that created it
  uint64_t transid = 0;     // ... that last changed it
};

struct DirEntryInfo {
  std::string name;
  uint64_t ino = 0;
  FileKind kind = FileKind::kRegular;
  uint64_t cookie = 0;  // its position; ReadDir from cookie + 1 continues after it
};

struct ReadDirResult {
  std::vector<DirEntryInfo> entries;
  uint64_t next_cookie = 0;  // pass to the next ReadDir
  bool more = false;
};

// fiemap flags (Linux's FIEMAP_EXTENT_* values).
inline constexpr uint32_t kFiemapExtentLast = 0x1;
inline constexpr uint32_t kFiemapExtentNotAligned = 0x100;
inline constexpr uint32_t kFiemapExtentInline = 0x200;
inline constexpr uint32_t kFiemapExtentUnwritten = 0x800;  // preallocated: reads as zeros
inline constexpr uint32_t kFiemapExtentShared = 0x2000;

struct FiemapExtent {
  uint64_t logical = 0;   // file offset
  uint64_t physical = 0;  // device byte address (0 for inline data)
  uint64_t length = 0;
  uint32_t flags = 0;
};

// fallocate modes (Linux's FALLOC_FL_* values).
inline constexpr uint32_t kFallocKeepSize = 0x01;
inline constexpr uint32_t kFallocPunchHole = 0x02;
inline constexpr uint32_t kFallocZeroRange = 0x10;

// An open handle (Files::Open, CreateTmpfile): a number unique within the
// subvolume's Files while the store is open, and the inode it is on.
struct OpenFile {
  uint64_t handle = 0;
  uint64_t ino = 0;
};

// A time SetAttr sets: the engine's clock at the call (`now`), or `ns`
// (nanoseconds since the Unix epoch), as utimensat's UTIME_NOW or a value.
struct AttrTime {
  bool now = false;
  int64_t ns = 0;
  static AttrTime Now() { return {true, 0}; }
  static AttrTime At(int64_t ns) { return {false, ns}; }
};

// What Files::SetAttr changes: each field that is set (chmod, chown,
// utimes, truncate in one call).
struct SetAttrSpec {
  std::optional<uint32_t> mode;  // permission bits (07777; EINVAL beyond); the kind stays
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::optional<AttrTime> atime;
  std::optional<AttrTime> mtime;
  std::optional<uint64_t> size;  // regular files only, as Truncate
};

inline constexpr uint32_t kXattrCreate = 1;   // setxattr: fail with EEXIST if present
inline constexpr uint32_t kXattrReplace = 2;  // setxattr: fail with ENODATA if absent

inline constexpr uint32_t kRenameNoReplace = 1;  // fail with ALREADY_EXISTS if `to` exists
inline constexpr uint32_t kRenameExchange = 2;   // swap `from` and `to` (both must exist)

// The file-like tree of one subvolume (btrfs's fs tree), beside its key
// space. Paths are '/'-separated from the subvolume's root directory;
// components are 1..255 bytes without NUL, "." and ".." are refused, and
// symlinks are not followed. Changes are atomic per call and durable at the
// next engine commit, or when Fsync of the inode (or of a directory that
// names it) returns. Errors are Status codes with the POSIX name first in
// the message: ENOENT NOT_FOUND; EEXIST ALREADY_EXISTS; ENOTDIR, EISDIR,
// ENOTEMPTY, EPERM, EMLINK and read-only snapshots FAILED_PRECONDITION;
// EINVAL, ENAMETOOLONG, EFBIG INVALID_ARGUMENT; ENOSPC RESOURCE_EXHAUSTED;
// a checksum failure DATA_LOSS. Thread-safe; cheap to copy.
class Files {
 public:
  absl::StatusOr<uint64_t> Lookup(absl::string_view path);
  absl::StatusOr<uint64_t> LookupAt(uint64_t dir, absl::string_view name);
  absl::StatusOr<FileStat> Stat(absl::string_view path);
  absl::StatusOr<FileStat> StatInode(uint64_t ino);
  absl::StatusOr<FileStat> Mkdir(absl::string_view path, uint32_t mode = 0755);
  absl::StatusOr<FileStat> Create(absl::string_view path, uint32_t mode = 0644);
  absl::StatusOr<FileStat> Symlink(absl::string_view target, absl::string_view path);
  absl::StatusOr<std::string> ReadLink(absl::string_view path);
  absl::StatusOr<std::string> ReadLinkInode(uint64_t ino);
  absl::Status Unlink(absl::string_view path);  // not a directory
  absl::Status Rmdir(absl::string_view path);   // an empty directory
  absl::Status Rename(absl::string_view from, absl::string_view to, uint32_t flags = 0);
  absl::StatusOr<FileStat> Link(absl::string_view existing, absl::string_view new_path);
  // The same by a directory's inode and a name in it (mkdirat, unlinkat,
  // renameat2, linkat with AT_EMPTY_PATH; FUSE's low-level calls).
  absl::StatusOr<FileStat> MkdirAt(uint64_t dir, absl::string_view name, uint32_t mode = 0755);
  absl::StatusOr<FileStat> CreateAt(uint64_t dir, absl::string_view name, uint32_t mode = 0644);
  absl::StatusOr<FileStat> SymlinkAt(absl::string_view target, uint64_t dir,
                                     absl::string_view name);
  absl::Status UnlinkAt(uint64_t dir, absl::string_view name);
  absl::Status RmdirAt(uint64_t dir, absl::string_view name);
  absl::Status RenameAt(uint64_t from_dir, absl::string_view from_name, uint64_t to_dir,
                        absl::string_view to_name, uint32_t flags = 0);
  absl::StatusOr<FileStat> LinkAt(uint64_t ino, uint64_t dir, absl::string_view name);
  // Entries in creation order from `cookie` (0 = the start), at most
  // `limit` (0 = all). Stable under concurrent changes: an entry is never
  // returned twice and entries present throughout are returned once.
  absl::StatusOr<ReadDirResult> ReadDir(absl::string_view path, uint64_t cookie = 0,
                                        uint64_t limit = 0);
  absl::StatusOr<ReadDirResult> ReadDirInode(uint64_t dir, uint64_t cookie = 0, uint64_t limit = 0);
  // Data, by inode. Reads past EOF return less; holes read as zeros.
  absl::StatusOr<std::string> Read(uint64_t ino, uint64_t offset, uint64_t length);
  absl::Status Write(uint64_t ino, uint64_t offset, absl::string_view data);
  absl::Status Truncate(uint64_t ino, uint64_t size);
  // Reflink: dst [dst_offset, +length) shares src's extents of [src_offset,
  // +length) (length 0 = to src's EOF).
  absl::Status Clone(uint64_t src, uint64_t src_offset, uint64_t dst, uint64_t dst_offset,
                     uint64_t length);
  // Returns once the inode (and, for a directory, its entries) survive a
  // crash; `datasync` skips the names of an inode older than the running
  // engine transaction.
  absl::Status Fsync(uint64_t ino, bool datasync = false);
  // Extents of [offset, +length) (length 0 = to EOF).
  absl::StatusOr<std::vector<FiemapExtent>> Fiemap(uint64_t ino, uint64_t offset = 0,
                                                   uint64_t length = 0);
  // Extended attributes. A name is 1..255 bytes without NUL (ENAMETOOLONG
  // past 255, EINVAL empty or with NUL), a value at most kMaxXattrValue
  // bytes (ERANGE past it). `flags`: kXattrCreate (EEXIST if the name is
  // set) or kXattrReplace (ENODATA if it is not), as setxattr(2). Get and
  // Remove of an absent name: ENODATA (NOT_FOUND). fsync of the inode logs
  // them, removals too.
  absl::Status SetXattr(uint64_t ino, absl::string_view name, absl::string_view value,
                        uint32_t flags = 0);
  absl::StatusOr<std::string> GetXattr(uint64_t ino, absl::string_view name);
  absl::StatusOr<std::vector<std::string>> ListXattrs(uint64_t ino);
  absl::Status RemoveXattr(uint64_t ino, absl::string_view name);
  // fallocate(2): `mode` is 0 (allocate: the holes of the range get
  // preallocated extents, which read as zeros and show as UNWRITTEN in
  // fiemap; the file grows to the range's end), kFallocKeepSize (the same
  // without changing the size, also past EOF), kFallocPunchHole |
  // kFallocKeepSize (the range becomes a hole) or kFallocZeroRange (with
  // or without kFallocKeepSize: the range becomes preallocated extents).
  // Other modes: EOPNOTSUPP (UNIMPLEMENTED); length 0: EINVAL; no space:
  // ENOSPC with nothing changed.
  absl::Status Fallocate(uint64_t ino, uint32_t mode, uint64_t offset, uint64_t length);

  // Open handles (memory only; none survive Store::Close). While a handle
  // is open on an inode, removing its last name (unlink, rename over it)
  // does not delete it: it lives on as an orphan (nlink 0, an ORPHAN_ITEM
  // on disk) that the data calls above, Fsync and Stat reach by inode,
  // until its last handle closes; after a crash the next mount deletes
  // it. Close of an unknown handle: "EBADF: ..." NOT_FOUND.
  absl::StatusOr<OpenFile> Open(uint64_t ino);
  absl::StatusOr<OpenFile> OpenPath(absl::string_view path);
  absl::Status Close(uint64_t handle);
  // The inode `handle` is open on (EBADF as Close).
  absl::StatusOr<uint64_t> HandleInode(uint64_t handle);
  // O_TMPFILE: an open handle on a new unnamed regular file in directory
  // `dir` (nlink 0, an orphan from birth); LinkAt(ino, dir, name) names it
  // (linkat with AT_EMPTY_PATH). Linking any other inode with nlink 0
  // answers ENOENT, as Linux does.
  absl::StatusOr<OpenFile> CreateTmpfile(uint64_t dir, uint32_t mode = 0644);
  // Inodes with an ORPHAN_ITEM, ascending (open orphans; after a mount's
  // cleanup none but those opened since).
  absl::StatusOr<std::vector<uint64_t>> Orphans();
  // setattr: changes what `spec` sets and returns the attributes after.
  // ctime becomes now when anything changes (an empty spec changes
  // nothing). chown of a non-directory clears set-user-ID (and set-group-ID
  // with group execute) unless the mode is set too, as Linux. The size goes
  // through Truncate first. A read-only snapshot or store: EROFS.
  absl::StatusOr<FileStat> SetAttr(uint64_t ino, const SetAttrSpec& spec);
  // Range writeback (sync_file_range, an fsync of a byte range): persists
  // at least [offset, +length) of the file's data (length 0 = to EOF), and
  // may persist more: today it is Fsync(ino, datasync) of the whole inode
  // (its data, size, and with !datasync its names and attributes).
  // offset + length past 2^63 - 1: EINVAL.
  absl::Status FsyncRange(uint64_t ino, uint64_t offset, uint64_t length, bool datasync = false);

 private:
  friend class Subvolume;
  Files(StoreImpl* store, uint64_t subvol) : store_(store), subvol_(subvol) {}
  StoreImpl* store_;
  uint64_t subvol_;
};

}  // namespace cowkv

#endif  // COWKV_INCLUDE_COWKV_FILES_H_
