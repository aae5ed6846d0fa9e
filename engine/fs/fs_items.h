// The file namespace's items: btrfs-shaped, on 17-byte keys under the tree
// key prefix 'f' (so a subvolume tree holds the KV key space under 'k' and
// the file tree under 'f', side by side).
//
//   ('f', ino, INODE_ITEM, 0)            -> InodeItem (96 bytes)
//   ('f', ino, INODE_REF, parent)        -> [InodeRef]   one per name in parent
//   ('f', ino, INODE_EXTREF, hash(parent, name)) -> [InodeExtref]  names that
//                                        did not fit the INODE_REF item
//   ('f', dir, DIR_ITEM, name_hash)      -> [DirEntry]   names hashing alike
//   ('f', dir, DIR_INDEX, index)         -> DirEntry     readdir order
//   ('f', ino, EXTENT_DATA, file_offset) -> FileExtent   inline or on disk
//   ('f', ino, XATTR_ITEM, name_hash)    -> [Xattr]
//   ('f', ORPHAN_OBJECTID, ORPHAN_ITEM, ino) -> empty   an inode with no
//                                        name kept alive by an open handle
//
// Every decoder checks every length against the item's size and returns
// DATA_LOSS naming the item on anything malformed. Byte layouts are in
// docs/format.md "File items".
#ifndef COWKV_ENGINE_FS_FS_ITEMS_H_
#define COWKV_ENGINE_FS_FS_ITEMS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cowkv/limits.h"
#include "engine/base/coding.h"

namespace cowkv {
namespace fs {

inline constexpr char kFsPrefix = 'f';
inline constexpr size_t kFsKeySize = 18;      // prefix + 17-byte key
inline constexpr uint64_t kRootDirIno = 256;  // btrfs's BTRFS_FIRST_FREE_OBJECTID

enum FsItemType : uint8_t {
  kInodeItem = 1,
  kInodeRef = 12,
  kInodeExtref = 13,  // btrfs's BTRFS_INODE_EXTREF_KEY
  kXattrItem = 24,
  kDirItem = 84,
  kDirIndex = 96,
  kExtentData = 108,
  kOrphanItem = 48,  // under kOrphanObjectid, offset = the orphaned inode
};

// Objectids from kLastFreeObjectid up are reserved (btrfs's
// BTRFS_LAST_FREE_OBJECTID, -256): never an inode number. Orphan items
// live under btrfs's ORPHAN_OBJECTID (-5), after every inode's items.
inline constexpr uint64_t kLastFreeObjectid = ~uint64_t{0} - 255;
inline constexpr uint64_t kOrphanObjectid = ~uint64_t{0} - 4;

struct FsKey {
  uint64_t objectid = 0;
  uint8_t type = 0;
  uint64_t offset = 0;
};
std::string EncodeFsKey(const FsKey& k);
// False unless `tree_key` is an 18-byte fs key.
bool DecodeFsKey(absl::string_view tree_key, FsKey* k);

// An encoded fs key held inline: what the key builders return and what an
// operation's batch is keyed by, so building or staging a key allocates
// nothing (a std::string of 18 bytes is past the small-string buffer).
class ItemKey {
 public:
  explicit ItemKey(const FsKey& k);
  // `encoded` must be an encoded fs key (kFsKeySize bytes).
  explicit ItemKey(absl::string_view encoded);
  absl::string_view view() const { return absl::string_view(buf_, kFsKeySize); }
  operator absl::string_view() const { return view(); }  // NOLINT: used as a key
  std::string str() const { return std::string(view()); }

 private:
  char buf_[kFsKeySize];
};
// Orders ItemKeys and string_views alike (heterogeneous lookup), as the
// bytes do, without a memcmp call for two fs keys (CompareKeyBytes).
struct ItemKeyLess {
  using is_transparent = void;
  bool operator()(absl::string_view a, absl::string_view b) const {
    return CompareKeyBytes(a, b) < 0;
  }
};

// Name hash for DIR_ITEM and XATTR_ITEM keys: crc32c of the name.
uint64_t NameHash(absl::string_view name);

// A directory entry or file name: 1..255 bytes, no '/' and no NUL, not "."
// or "..". INVALID_ARGUMENT ("ENAMETOOLONG: ..." for long names).
absl::Status ValidateName(absl::string_view name);

// File types as stored in directory entries (the S_IFMT nibble >> 12).
enum class FileType : uint8_t { kRegular = 8, kDirectory = 4, kSymlink = 10 };

inline constexpr size_t kInodeItemSize = 96;
struct InodeItem {
  uint64_t generation = 0;  // engine generation that created the inode
  uint64_t transid = 0;     // generation of the last change
  uint64_t size = 0;
  uint64_t nbytes = 0;  // bytes of data extents referenced
  uint32_t nlink = 0;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t mode = 0;  // S_IFMT | permission bits
  uint64_t rdev = 0;
  uint64_t flags = 0;
  int64_t atime_ns = 0;
  int64_t ctime_ns = 0;
  int64_t mtime_ns = 0;
  int64_t otime_ns = 0;  // creation
};
std::string EncodeInodeItem(const InodeItem& it);
absl::StatusOr<InodeItem> DecodeInodeItem(absl::string_view v, uint64_t ino);

// INODE_REF value: one or more {index u64, name_len u16, name}.
struct InodeRef {
  uint64_t index = 0;  // the DIR_INDEX offset of this name in the parent
  std::string name;
  bool extref = false;  // in memory only: held by an INODE_EXTREF item
};
inline constexpr size_t kInodeRefHeader = 8 + 2;  // index, name length; then the name
std::string EncodeInodeRefs(const std::vector<InodeRef>& refs);
absl::StatusOr<std::vector<InodeRef>> DecodeInodeRefs(absl::string_view v, uint64_t ino);

// INODE_EXTREF value: one or more {parent u64, index u64, name_len u16,
// name}, the names whose ExtrefHash(parent, name) is the key's offset
// (btrfs's extended refs: an inode's names in one directory beyond what
// its INODE_REF item holds, up to kMaxLinks names in all).
struct InodeExtref {
  uint64_t parent = 0;
  uint64_t index = 0;
  std::string name;
};
inline constexpr size_t kInodeExtrefHeader = 8 + 8 + 2;
// crc32c of the parent (u64 little-endian) followed by the name.
uint64_t ExtrefHash(uint64_t parent, absl::string_view name);
std::string EncodeInodeExtrefs(const std::vector<InodeExtref>& refs);
// Every entry's hash must be `key_hash` (DATA_LOSS otherwise).
absl::StatusOr<std::vector<InodeExtref>> DecodeInodeExtrefs(absl::string_view v, uint64_t ino,
                                                            uint64_t key_hash);

// DIR_ITEM value: one or more entries; DIR_INDEX value: exactly one.
// Entry: {child u64, type u8, transid u64, name_len u16, name}.
struct DirEntry {
  uint64_t child = 0;
  FileType type = FileType::kRegular;
  uint64_t transid = 0;
  std::string name;
};
std::string EncodeDirEntries(const std::vector<DirEntry>& entries);
absl::StatusOr<std::vector<DirEntry>> DecodeDirEntries(absl::string_view v, uint64_t dir);
absl::StatusOr<DirEntry> DecodeDirIndex(absl::string_view v, uint64_t dir);
// The entry named `name` in a DIR_ITEM value, or nullopt; every entry is
// checked as DecodeDirEntries does, but only the match is copied out.
absl::StatusOr<std::optional<DirEntry>> FindDirEntry(absl::string_view v, uint64_t dir,
                                                     absl::string_view name);

// EXTENT_DATA value: u64 generation, u8 kind, 7 bytes zero, then
//   inline:  the data bytes (the extent covers exactly them);
//   regular: u64 disk_bytenr, u64 disk_len, u64 offset, u64 num_bytes,
//            u32 crc32c of the whole disk extent's data, u32 zero;
//   prealloc: the regular layout, crc 0 (btrfs's BTRFS_FILE_EXTENT_PREALLOC:
//            allocated by fallocate, never written; reads as zeros).
// The file range [key offset, + num_bytes) reads the extent's bytes
// [offset, offset + num_bytes) (zeros for prealloc); ranges with no item
// are holes.
inline constexpr uint8_t kExtentInline = 0;
inline constexpr uint8_t kExtentRegular = 1;
inline constexpr uint8_t kExtentPrealloc = 2;
inline constexpr size_t kFileExtentHeaderSize = 16;
inline constexpr size_t kFileExtentRegularSize = 16 + 40;
struct FileExtent {
  uint64_t generation = 0;
  uint8_t kind = kExtentInline;
  std::string inline_data;  // kExtentInline
  uint64_t disk_bytenr = 0;  // kExtentRegular
  uint64_t disk_len = 0;
  uint64_t offset = 0;
  uint64_t num_bytes = 0;
  uint32_t crc = 0;
  // Regular or prealloc: points at a data extent.
  bool on_disk() const { return kind == kExtentRegular || kind == kExtentPrealloc; }
  // Bytes of the file this extent covers.
  uint64_t length() const { return kind == kExtentInline ? inline_data.size() : num_bytes; }
};
std::string EncodeFileExtent(const FileExtent& e);
absl::StatusOr<FileExtent> DecodeFileExtent(absl::string_view v, uint64_t ino, uint64_t offset);

// XATTR_ITEM value: one or more {name_len u16, value_len u16, name, value}.
struct Xattr {
  std::string name;
  std::string value;
};
std::string EncodeXattrs(const std::vector<Xattr>& xs);
absl::StatusOr<std::vector<Xattr>> DecodeXattrs(absl::string_view v, uint64_t ino);

// Decodes the value of any fs item by its key's type (DATA_LOSS on anything
// malformed or an unknown type). Used to vet log entries before replay.
absl::Status ValidateItem(const FsKey& k, absl::string_view value);

}  // namespace fs
}  // namespace cowkv

#endif  // COWKV_ENGINE_FS_FS_ITEMS_H_
