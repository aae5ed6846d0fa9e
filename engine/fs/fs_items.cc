#include "engine/fs/fs_items.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/base/coding.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"

namespace cowkv {
namespace fs {

namespace {

absl::Status Bad(absl::string_view what, uint64_t objectid, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("corrupt ", what, " of inode ", objectid, ": ", why));
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

void PutEntry(std::string* out, const DirEntry& e) {
  PutLE64(out, e.child);
  out->push_back(static_cast<char>(e.type));
  PutLE64(out, e.transid);
  PutU16(out, static_cast<uint16_t>(e.name.size()));
  out->append(e.name);
}

bool ReadEntry(Reader* r, DirEntry* e) {
  e->child = r->LE64();
  const uint8_t type = r->U8();
  e->transid = r->LE64();
  const uint16_t len = r->LE16();
  e->name = std::string(r->Bytes(len));
  e->type = static_cast<FileType>(type);
  return r->ok() && KnownType(type) && SaneName(e->name) && e->child != 0;
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
    return absl::InvalidArgumentError(
        absl::StrCat("ENAMETOOLONG: a name is at most ", kMaxNameLen, " bytes, not ", name.size()));
  }
  if (name.empty() || name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("EINVAL: bad name '", name, "'"));
  }
  if (name.find('/') != absl::string_view::npos || name.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("EINVAL: a name may not contain '/' or NUL: '", absl::CHexEscape(name), "'"));
  }
  return absl::OkStatus();
}

std::string EncodeInodeItem(const InodeItem& it) {
  std::string out;
  out.reserve(kInodeItemSize);
  PutLE64(&out, it.generation);
  PutLE64(&out, it.transid);
  PutLE64(&out, it.size);
  PutLE64(&out, it.nbytes);
  PutLE32(&out, it.nlink);
  PutLE32(&out, it.uid);
  PutLE32(&out, it.gid);
  PutLE32(&out, it.mode);
  PutLE64(&out, it.rdev);
  PutLE64(&out, it.flags);
  PutLE64(&out, static_cast<uint64_t>(it.atime_ns));
  PutLE64(&out, static_cast<uint64_t>(it.ctime_ns));
  PutLE64(&out, static_cast<uint64_t>(it.mtime_ns));
  PutLE64(&out, static_cast<uint64_t>(it.otime_ns));
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
  std::string out;
  for (const InodeRef& r : refs) {
    PutLE64(&out, r.index);
    PutU16(&out, static_cast<uint16_t>(r.name.size()));
    out.append(r.name);
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

std::string EncodeDirEntries(const std::vector<DirEntry>& entries) {
  std::string out;
  for (const DirEntry& e : entries) PutEntry(&out, e);
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

absl::StatusOr<DirEntry> DecodeDirIndex(absl::string_view v, uint64_t dir) {
  Reader r(v);
  DirEntry e;
  if (!ReadEntry(&r, &e) || r.remaining() != 0) {
    return Bad("dir index", dir, "not exactly one entry");
  }
  return e;
}

std::string EncodeFileExtent(const FileExtent& e) {
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
  const std::string what = absl::StrCat("file extent at ", offset);
  if (v.size() < kFileExtentHeaderSize) return Bad(what, ino, "short");
  Reader r(v);
  FileExtent e;
  e.generation = r.LE64();
  e.kind = r.U8();
  for (int i = 0; i < 7; ++i) {
    if (r.U8() != 0) return Bad(what, ino, "non-zero padding");
  }
  if (e.kind == kExtentInline) {
    e.inline_data = std::string(v.substr(kFileExtentHeaderSize));
    if (e.inline_data.empty()) return Bad(what, ino, "empty inline extent");
    return e;
  }
  if (e.kind != kExtentRegular || v.size() != kFileExtentRegularSize) {
    return Bad(what, ino, absl::StrCat("kind ", int{e.kind}, " of ", v.size(), " bytes"));
  }
  e.disk_bytenr = r.LE64();
  e.disk_len = r.LE64();
  e.offset = r.LE64();
  e.num_bytes = r.LE64();
  e.crc = r.LE32();
  const uint32_t pad = r.LE32();
  if (!r.ok() || pad != 0 || e.disk_len == 0 || e.num_bytes == 0 || e.offset >= e.disk_len ||
      e.num_bytes > e.disk_len - e.offset || offset + e.num_bytes < offset) {
    return Bad(what, ino,
               absl::StrCat("extent [", e.disk_bytenr, ", +", e.disk_len, ") range ", e.offset,
                            "+", e.num_bytes));
  }
  return e;
}

std::string EncodeXattrs(const std::vector<Xattr>& xs) {
  std::string out;
  for (const Xattr& x : xs) {
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
    case kDirItem:
      return DecodeDirEntries(value, k.objectid).status();
    case kDirIndex:
      return DecodeDirIndex(value, k.objectid).status();
    case kExtentData:
      return DecodeFileExtent(value, k.objectid, k.offset).status();
    case kXattrItem:
      return DecodeXattrs(value, k.objectid).status();
    default:
      return Bad("item", k.objectid, absl::StrCat("unknown item type ", int{k.type}));
  }
}

}  // namespace fs
}  // namespace cowkv
