#include "engine/fs/fs_items.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/base/check.h"
#include "engine/base/coding.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"

namespace cowkv {
namespace fs {

namespace {

// A corrupt item of inode `objectid`. The default argument is the caller's
// line (GCC and Clang), so the message names the check that failed.
absl::Status Bad(absl::string_view what, uint64_t objectid, absl::string_view why,
                 int line = __builtin_LINE()) {
  CorruptionSite site;
  site.what = what;
  site.inode = objectid;
  return CorruptionError(site, why, "", "", __FILE__, line);
}

void PutU16(std::string* out, uint16_t v) {
  char b[2];
  EncodeLE16(b, v);
  out->append(b, 2);
}

// A name as read from an item: 1..255 bytes, no '/' or NUL.
bool SaneName(absl::string_view n) {
  return !n.empty() && n.size() <= kMaxNameLen && n.find('/') == absl::string_view::npos &&
         n.find('\0') == absl::string_view::npos;
}

bool KnownType(uint8_t t) {
  return t == static_cast<uint8_t>(FileType::kRegular) ||
         t == static_cast<uint8_t>(FileType::kDirectory) ||
         t == static_cast<uint8_t>(FileType::kSymlink);
}

// Fills a buffer sized up front: one allocation per encoded item.
class Filler {
 public:
  Filler(std::string* out, size_t n) {
    const size_t at = out->size();
    out->resize(at + n);
    p_ = out->data() + at;
  }
  void LE64(uint64_t v) { EncodeLE64(Take(8), v); }
  void LE32(uint32_t v) { EncodeLE32(Take(4), v); }
  void LE16(uint16_t v) { EncodeLE16(Take(2), v); }
  void U8(uint8_t v) { *Take(1) = static_cast<char>(v); }
  void Bytes(absl::string_view b) { std::memcpy(Take(b.size()), b.data(), b.size()); }

 private:
  char* Take(size_t n) {
    char* at = p_;
    p_ += n;
    return at;
  }
  char* p_;
};

constexpr size_t kEntryHeader = 8 + 1 + 8 + 2;

// What ReadEntryView refuses but 'child != 0': replay fixes entries up for
// inode numbers read from the log, which only the log's decoder vets.
void PutEntry(Filler* f, const DirEntry& e) {
  COWKV_CHECK(KnownType(static_cast<uint8_t>(e.type)));
  COWKV_CHECK(!e.name.empty());
  COWKV_CHECK(e.name.size() <= kMaxNameLen);
  COWKV_DCHECK(SaneName(e.name));
  f->LE64(e.child);
  f->U8(static_cast<uint8_t>(e.type));
  f->LE64(e.transid);
  f->LE16(static_cast<uint16_t>(e.name.size()));
  f->Bytes(e.name);
}

// One entry, its name viewing the encoded bytes.
struct EntryView {
  uint64_t child = 0;
  uint8_t type = 0;
  uint64_t transid = 0;
  absl::string_view name;
};

bool ReadEntryView(Reader* r, EntryView* e) {
  e->child = r->LE64();
  e->type = r->U8();
  e->transid = r->LE64();
  const uint16_t len = r->LE16();
  e->name = r->Bytes(len);
  return r->ok() && KnownType(e->type) && SaneName(e->name) && e->child != 0;
}

DirEntry ToEntry(const EntryView& v) {
  return DirEntry{v.child, static_cast<FileType>(v.type), v.transid, std::string(v.name)};
}

bool ReadEntry(Reader* r, DirEntry* e) {
  EntryView v;
  if (!ReadEntryView(r, &v)) return false;
  *e = ToEntry(v);
  return true;
}

}  // namespace

std::string EncodeFsKey(const FsKey& k) {
  std::string out(kFsKeySize, '\0');
  out[0] = kFsPrefix;
  EncodeBE64(out.data() + 1, k.objectid);
  out[9] = static_cast<char>(k.type);
  EncodeBE64(out.data() + 10, k.offset);
  return out;
}

ItemKey::ItemKey(const FsKey& k) {
  buf_[0] = kFsPrefix;
  EncodeBE64(buf_ + 1, k.objectid);
  buf_[9] = static_cast<char>(k.type);
  EncodeBE64(buf_ + 10, k.offset);
}

ItemKey::ItemKey(absl::string_view encoded) {
  COWKV_CHECK_MSG(encoded.size() == kFsKeySize && encoded[0] == kFsPrefix,
                  "not an encoded fs key");
  std::memcpy(buf_, encoded.data(), kFsKeySize);
}

bool DecodeFsKey(absl::string_view tree_key, FsKey* k) {
  if (tree_key.size() != kFsKeySize || tree_key[0] != kFsPrefix) return false;
  k->objectid = DecodeBE64(tree_key.data() + 1);
  k->type = static_cast<uint8_t>(tree_key[9]);
  k->offset = DecodeBE64(tree_key.data() + 10);
  return true;
}

uint64_t NameHash(absl::string_view name) { return Crc32c(name.data(), name.size()); }

absl::Status ValidateName(absl::string_view name) {
  if (name.size() > kMaxNameLen) {
    return PosixError(ErrorReason::kENAMETOOLONG,
                      absl::StrCat("a name is at most ", kMaxNameLen, " bytes, not ", name.size()));
  }
  if (name.empty() || name == "." || name == "..") {
    return PosixError(ErrorReason::kEINVAL, absl::StrCat("bad name '", name, "'"));
  }
  if (name.find('/') != absl::string_view::npos || name.find('\0') != absl::string_view::npos) {
    return PosixError(ErrorReason::kEINVAL, absl::StrCat("a name may not contain '/' or NUL: '",
                                                         absl::CHexEscape(name), "'"));
  }
  return absl::OkStatus();
}

std::string EncodeInodeItem(const InodeItem& it) {
  // The file types DecodeInodeItem accepts. (Not transid >= generation,
  // which it also checks: an inode read with a generation ahead of the
  // running one gets transid = now, and that must not crash.)
  const uint32_t fmt = it.mode & 0170000;
  COWKV_CHECK(fmt == 0100000 || fmt == 0040000 || fmt == 0120000);
  std::string out;
  Filler f(&out, kInodeItemSize);
  f.LE64(it.generation);
  f.LE64(it.transid);
  f.LE64(it.size);
  f.LE64(it.nbytes);
  f.LE32(it.nlink);
  f.LE32(it.uid);
  f.LE32(it.gid);
  f.LE32(it.mode);
  f.LE64(it.rdev);
  f.LE64(it.flags);
  f.LE64(static_cast<uint64_t>(it.atime_ns));
  f.LE64(static_cast<uint64_t>(it.ctime_ns));
  f.LE64(static_cast<uint64_t>(it.mtime_ns));
  f.LE64(static_cast<uint64_t>(it.otime_ns));
  return out;
}

absl::StatusOr<InodeItem> DecodeInodeItem(absl::string_view v, uint64_t ino) {
  if (v.size() != kInodeItemSize) {
    return Bad("inode item", ino, absl::StrCat(v.size(), " bytes, want ", kInodeItemSize));
  }
  Reader r(v);
  InodeItem it;
  it.generation = r.LE64();
  it.transid = r.LE64();
  it.size = r.LE64();
  it.nbytes = r.LE64();
  it.nlink = r.LE32();
  it.uid = r.LE32();
  it.gid = r.LE32();
  it.mode = r.LE32();
  it.rdev = r.LE64();
  it.flags = r.LE64();
  it.atime_ns = static_cast<int64_t>(r.LE64());
  it.ctime_ns = static_cast<int64_t>(r.LE64());
  it.mtime_ns = static_cast<int64_t>(r.LE64());
  it.otime_ns = static_cast<int64_t>(r.LE64());
  const uint32_t fmt = it.mode & 0170000;
  if (fmt != 0100000 && fmt != 0040000 && fmt != 0120000) {
    return Bad("inode item", ino, absl::StrCat("file type bits ", fmt >> 12));
  }
  if (it.transid < it.generation) return Bad("inode item", ino, "transid below generation");
  return it;
}

std::string EncodeInodeRefs(const std::vector<InodeRef>& refs) {
  COWKV_CHECK(!refs.empty());  // the last name gone deletes the item
  size_t n = 0;
  for (const InodeRef& r : refs) {
    COWKV_CHECK(!r.name.empty());
    COWKV_CHECK(r.name.size() <= kMaxNameLen);
    COWKV_DCHECK(SaneName(r.name));
    n += kInodeRefHeader + r.name.size();
  }
  std::string out;
  Filler f(&out, n);
  for (const InodeRef& r : refs) {
    f.LE64(r.index);
    f.LE16(static_cast<uint16_t>(r.name.size()));
    f.Bytes(r.name);
  }
  return out;
}

absl::StatusOr<std::vector<InodeRef>> DecodeInodeRefs(absl::string_view v, uint64_t ino) {
  Reader r(v);
  std::vector<InodeRef> out;
  while (r.remaining() > 0) {
    InodeRef ref;
    ref.index = r.LE64();
    const uint16_t len = r.LE16();
    ref.name = std::string(r.Bytes(len));
    if (!r.ok() || !SaneName(ref.name)) return Bad("inode ref", ino, "truncated or bad name");
    out.push_back(std::move(ref));
  }
  if (out.empty()) return Bad("inode ref", ino, "empty");
  return out;
}

uint64_t ExtrefHash(uint64_t parent, absl::string_view name) {
  COWKV_DCHECK(name.size() <= kMaxNameLen);
  char buf[8 + kMaxNameLen];
  EncodeLE64(buf, parent);
  std::memcpy(buf + 8, name.data(), std::min(name.size(), kMaxNameLen));
  return Crc32c(buf, 8 + std::min(name.size(), kMaxNameLen));
}

std::string EncodeInodeExtrefs(const std::vector<InodeExtref>& refs) {
  COWKV_CHECK(!refs.empty());  // the last name gone deletes the item
  size_t n = 0;
  for (const InodeExtref& r : refs) {
    COWKV_CHECK(!r.name.empty());
    COWKV_CHECK(r.name.size() <= kMaxNameLen);
    COWKV_DCHECK(SaneName(r.name));
    n += kInodeExtrefHeader + r.name.size();
  }
  std::string out;
  Filler f(&out, n);
  for (const InodeExtref& r : refs) {
    f.LE64(r.parent);
    f.LE64(r.index);
    f.LE16(static_cast<uint16_t>(r.name.size()));
    f.Bytes(r.name);
  }
  return out;
}

absl::StatusOr<std::vector<InodeExtref>> DecodeInodeExtrefs(absl::string_view v, uint64_t ino,
                                                            uint64_t key_hash) {
  Reader r(v);
  std::vector<InodeExtref> out;
  while (r.remaining() > 0) {
    InodeExtref ref;
    ref.parent = r.LE64();
    ref.index = r.LE64();
    const uint16_t len = r.LE16();
    ref.name = std::string(r.Bytes(len));
    if (!r.ok() || !SaneName(ref.name)) return Bad("inode extref", ino, "truncated or bad name");
    if (ExtrefHash(ref.parent, ref.name) != key_hash) {
      return Bad("inode extref", ino,
                 absl::StrCat("name \"", ref.name, "\" in directory ", ref.parent,
                              " in the wrong hash slot"));
    }
    out.push_back(std::move(ref));
  }
  if (out.empty()) return Bad("inode extref", ino, "empty");
  return out;
}

std::string EncodeDirEntries(const std::vector<DirEntry>& entries) {
  COWKV_CHECK(!entries.empty());  // the last entry gone deletes the item
  size_t n = 0;
  for (const DirEntry& e : entries) n += kEntryHeader + e.name.size();
  std::string out;
  Filler f(&out, n);
  for (const DirEntry& e : entries) PutEntry(&f, e);
  return out;
}

absl::StatusOr<std::vector<DirEntry>> DecodeDirEntries(absl::string_view v, uint64_t dir) {
  Reader r(v);
  std::vector<DirEntry> out;
  while (r.remaining() > 0) {
    DirEntry e;
    if (!ReadEntry(&r, &e)) return Bad("dir item", dir, "truncated or bad entry");
    out.push_back(std::move(e));
  }
  if (out.empty()) return Bad("dir item", dir, "empty");
  return out;
}

absl::StatusOr<std::optional<DirEntry>> FindDirEntry(absl::string_view v, uint64_t dir,
                                                     absl::string_view name) {
  Reader r(v);
  std::optional<DirEntry> found;
  while (r.remaining() > 0) {
    EntryView e;
    if (!ReadEntryView(&r, &e)) return Bad("dir item", dir, "truncated or bad entry");
    if (!found.has_value() && e.name == name) found = ToEntry(e);
  }
  if (v.empty()) return Bad("dir item", dir, "empty");
  return found;
}

absl::StatusOr<DirEntry> DecodeDirIndex(absl::string_view v, uint64_t dir) {
  Reader r(v);
  DirEntry e;
  if (!ReadEntry(&r, &e) || r.remaining() != 0) {
    return Bad("dir index", dir, "not exactly one entry");
  }
  return e;
}

std::string EncodeFileExtent(const FileExtent& e) {
  // What DecodeFileExtent refuses (but the key offset's overflow, which it
  // checks against the key).
  COWKV_CHECK(e.kind == kExtentInline || e.kind == kExtentRegular || e.kind == kExtentPrealloc);
  if (e.kind == kExtentInline) {
    COWKV_CHECK(!e.inline_data.empty());
  } else {
    COWKV_CHECK(e.kind != kExtentPrealloc || e.crc == 0);
    COWKV_CHECK(e.disk_len > 0);
    COWKV_CHECK(e.num_bytes > 0);
    COWKV_CHECK(e.offset < e.disk_len);
    COWKV_CHECK(e.num_bytes <= e.disk_len - e.offset);
  }
  std::string out;
  PutLE64(&out, e.generation);
  out.push_back(static_cast<char>(e.kind));
  out.append(7, '\0');
  if (e.kind == kExtentInline) {
    out.append(e.inline_data);
    return out;
  }
  PutLE64(&out, e.disk_bytenr);
  PutLE64(&out, e.disk_len);
  PutLE64(&out, e.offset);
  PutLE64(&out, e.num_bytes);
  PutLE32(&out, e.crc);
  PutLE32(&out, 0);
  return out;
}

absl::StatusOr<FileExtent> DecodeFileExtent(absl::string_view v, uint64_t ino, uint64_t offset) {
  // Built only on the error paths: a fiemap decodes every extent item.
  auto bad = [&](absl::string_view why, int line = __builtin_LINE()) {
    return Bad(absl::StrCat("file extent at ", offset), ino, why, line);
  };
  if (v.size() < kFileExtentHeaderSize) return bad("short");
  Reader r(v);
  FileExtent e;
  e.generation = r.LE64();
  e.kind = r.U8();
  for (int i = 0; i < 7; ++i) {
    if (r.U8() != 0) return bad("non-zero padding");
  }
  if (e.kind == kExtentInline) {
    e.inline_data = std::string(v.substr(kFileExtentHeaderSize));
    if (e.inline_data.empty()) return bad("empty inline extent");
    return e;
  }
  if ((e.kind != kExtentRegular && e.kind != kExtentPrealloc) ||
      v.size() != kFileExtentRegularSize) {
    return bad(absl::StrCat("kind ", int{e.kind}, " of ", v.size(), " bytes"));
  }
  e.disk_bytenr = r.LE64();
  e.disk_len = r.LE64();
  e.offset = r.LE64();
  e.num_bytes = r.LE64();
  e.crc = r.LE32();
  const uint32_t pad = r.LE32();
  if (!r.ok() || pad != 0 || e.disk_len == 0 || e.num_bytes == 0 || e.offset >= e.disk_len ||
      e.num_bytes > e.disk_len - e.offset || offset + e.num_bytes < offset) {
    return bad(absl::StrCat("extent [", e.disk_bytenr, ", +", e.disk_len, ") range ", e.offset,
                            "+", e.num_bytes));
  }
  // A preallocated extent's data was never written: nothing to checksum.
  if (e.kind == kExtentPrealloc && e.crc != 0) return bad("preallocated extent with a checksum");
  return e;
}

std::string EncodeXattrs(const std::vector<Xattr>& xs) {
  COWKV_CHECK(!xs.empty());  // the last one removed deletes the item
  std::string out;
  for (const Xattr& x : xs) {
    COWKV_CHECK(!x.name.empty());
    COWKV_CHECK(x.name.size() <= 0xffff);  // u16 lengths
    COWKV_CHECK(x.value.size() <= 0xffff);
    COWKV_DCHECK(x.name.find('\0') == std::string::npos);
    PutU16(&out, static_cast<uint16_t>(x.name.size()));
    PutU16(&out, static_cast<uint16_t>(x.value.size()));
    out.append(x.name);
    out.append(x.value);
  }
  return out;
}

absl::StatusOr<std::vector<Xattr>> DecodeXattrs(absl::string_view v, uint64_t ino) {
  Reader r(v);
  std::vector<Xattr> out;
  while (r.remaining() > 0) {
    Xattr x;
    const uint16_t nlen = r.LE16(), vlen = r.LE16();
    x.name = std::string(r.Bytes(nlen));
    x.value = std::string(r.Bytes(vlen));
    if (!r.ok() || x.name.empty() || x.name.find('\0') != std::string::npos) {
      return Bad("xattr", ino, "truncated or bad name");
    }
    out.push_back(std::move(x));
  }
  if (out.empty()) return Bad("xattr", ino, "empty");
  return out;
}

absl::Status ValidateItem(const FsKey& k, absl::string_view value) {
  switch (k.type) {
    case kInodeItem:
      return DecodeInodeItem(value, k.objectid).status();
    case kInodeRef:
      return DecodeInodeRefs(value, k.objectid).status();
    case kInodeExtref:
      return DecodeInodeExtrefs(value, k.objectid, k.offset).status();
    case kDirItem:
      return DecodeDirEntries(value, k.objectid).status();
    case kDirIndex:
      return DecodeDirIndex(value, k.objectid).status();
    case kExtentData:
      return DecodeFileExtent(value, k.objectid, k.offset).status();
    case kXattrItem:
      return DecodeXattrs(value, k.objectid).status();
    case kOrphanItem:
      if (k.objectid != kOrphanObjectid) {
        return Bad("orphan item", k.objectid,
                   absl::StrCat("objectid ", k.objectid, ", want ", kOrphanObjectid));
      }
      if (!value.empty()) {
        return Bad("orphan item", k.offset, absl::StrCat(value.size(), " bytes, want 0"));
      }
      if (k.offset <= kRootDirIno || k.offset >= kLastFreeObjectid) {
        return Bad("orphan item", k.offset, "not a file's inode number");
      }
      return absl::OkStatus();
    default:
      return Bad("item", k.objectid, absl::StrCat("unknown item type ", int{k.type}));
  }
}

}  // namespace fs
}  // namespace cowkv
