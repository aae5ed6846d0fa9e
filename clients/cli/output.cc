// Tables, JSON and the filefrag-style extent map (see output.h).
#include "clients/cli/output.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace cowkv {
namespace cli {

namespace {

// Length of the UTF-8 sequence at s[i], or 0 if it is not well-formed.
size_t Utf8Length(absl::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  uint32_t cp = 0;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const unsigned char d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3F);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
  if (overlong || surrogate || cp > 0x10FFFF) return 0;
  return n;
}

void AppendEscapedByte(unsigned char c, std::string* out) {
  switch (c) {
    case '\\':
      *out += "\\\\";
      return;
    case '\t':
      *out += "\\t";
      return;
    case '\n':
      *out += "\\n";
      return;
    case '\r':
      *out += "\\r";
      return;
    default:
      absl::StrAppendFormat(out, "\\x%02x", c);
  }
}

}  // namespace

bool IsUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8Length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string EscapeBytes(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = Utf8Length(s, i);
    if (n > 1) {
      out.append(s.data() + i, n);
      i += n;
    } else if (n == 1 && c >= 0x20 && c != 0x7F && c != '\\') {
      out += static_cast<char>(c);
      ++i;
    } else {
      AppendEscapedByte(c, &out);
      ++i;
    }
  }
  return out;
}

Json BytesJson(absl::string_view s) {
  if (IsUtf8(s)) return Json(std::string(s));
  Json j = Json::object();
  j["base64"] = absl::Base64Escape(s);
  return j;
}

absl::StatusOr<std::string> BytesFromJson(const Json& j,
                                          absl::string_view what) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.size() == 1 && j.contains("base64") &&
      j["base64"].is_string()) {
    std::string out;
    if (absl::Base64Unescape(j["base64"].get<std::string>(), &out)) {
      return out;
    }
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": invalid base64"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": want a string or {\"base64\": \"...\"}, got ", j.dump()));
}

Json JsonObject() {
  Json j = Json::object();
  j["__header"] = {{"version", "1"}};
  return j;
}

std::string DumpJson(const Json& j) {
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

Table::Table(std::vector<std::string> columns) {
  for (std::string& c : columns) {
    const bool right = !c.empty() && c.back() == '>';
    if (right) c.pop_back();
    right_.push_back(right);
    names_.push_back(std::move(c));
  }
}

void Table::Add(std::vector<std::string> row) {
  row.resize(names_.size());
  rows_.push_back(std::move(row));
}

std::string Table::Render() const {
  std::vector<size_t> width(names_.size());
  for (size_t c = 0; c < names_.size(); ++c) width[c] = names_[c].size();
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      if (c > 0) l += "  ";
      l += right_[c] ? pad + cells[c] : cells[c] + pad;
    }
    l.erase(l.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, l, "\n");
  };
  line(names_);
  for (const auto& row : rows_) line(row);
  return out;
}

std::string FormatUnixMs(uint64_t ms) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S",
                          absl::FromUnixMillis(static_cast<int64_t>(ms)),
                          absl::LocalTimeZone());
}

std::string FormatUnixNs(int64_t ns) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%E9S %z", absl::FromUnixNanos(ns),
                          absl::LocalTimeZone());
}

std::string KindLong(v1::FileKind kind) {
  switch (kind) {
    case v1::FILE_KIND_DIRECTORY:
      return "directory";
    case v1::FILE_KIND_SYMLINK:
      return "symbolic link";
    default:
      return "regular file";
  }
}

std::string KindShort(v1::FileKind kind) {
  switch (kind) {
    case v1::FILE_KIND_DIRECTORY:
      return "directory";
    case v1::FILE_KIND_SYMLINK:
      return "symlink";
    default:
      return "regular";
  }
}

std::string ModeString(v1::FileKind kind, uint32_t mode) {
  std::string s = kind == v1::FILE_KIND_DIRECTORY ? "d"
                  : kind == v1::FILE_KIND_SYMLINK ? "l"
                                                  : "-";
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) {
    s += (mode & (0400u >> i)) ? rwx[i] : '-';
  }
  if (mode & 04000) s[3] = (mode & 0100) ? 's' : 'S';
  if (mode & 02000) s[6] = (mode & 0010) ? 's' : 'S';
  if (mode & 01000) s[9] = (mode & 0001) ? 't' : 'T';
  return s;
}

// The extent map.

std::vector<std::string> FiemapFlagNames(uint32_t flags) {
  std::vector<std::string> names;
  // One flag a line, in bit order (filefrag's).
  // clang-format off
  const std::pair<uint32_t, const char*> kNames[] = {
      {v1::FIEMAP_FLAG_LAST, "last"},
      {v1::FIEMAP_FLAG_NOT_ALIGNED, "not_aligned"},
      {v1::FIEMAP_FLAG_INLINE, "inline"},
      {v1::FIEMAP_FLAG_UNWRITTEN, "unwritten"},
      {v1::FIEMAP_FLAG_SHARED, "shared"}};
  // clang-format on
  for (const auto& [bit, name] : kNames) {
    if (flags & bit) {
      names.push_back(name);
      flags &= ~bit;
    }
  }
  for (uint32_t bit = 1; flags != 0 && bit != 0; bit <<= 1) {
    if (flags & bit) {
      names.push_back(absl::StrFormat("%#04x", bit));
      flags &= ~bit;
    }
  }
  return names;
}

namespace {

constexpr int kBlockShift = 12;  // 4 KiB blocks, as filefrag shows them

int Digits(uint64_t v) {
  int d = 1;
  while (v >= 10) {
    v /= 10;
    ++d;
  }
  return d;
}

struct FiemapWidths {
  int logical = 8;    // filefrag's minimums
  int physical = 10;
};

FiemapWidths WidthsFor(uint64_t blocks,
                       const std::vector<v1::FiemapExtent>& extents) {
  FiemapWidths w;
  w.logical = std::max(w.logical, Digits(blocks));
  for (const v1::FiemapExtent& e : extents) {
    w.physical =
        std::max(w.physical, Digits((e.physical() + e.length()) >> kBlockShift));
  }
  return w;
}

std::string FiemapRow(int index, const v1::FiemapExtent& e, uint64_t expected,
                      uint64_t size, const FiemapWidths& w) {
  const int shift = (e.flags() & v1::FIEMAP_FLAG_INLINE) ? 0 : kBlockShift;
  const uint64_t len = e.length() >> shift;
  const uint64_t last = e.length() == 0 ? 0 : (e.length() - 1) >> shift;
  const uint64_t logical = e.logical() >> shift;
  const uint64_t physical = e.physical() >> shift;
  std::string tail =
      expected != 0
          ? absl::StrFormat("%*d: ", w.physical, expected >> shift)
          : std::string(w.physical + 2, ' ');
  std::vector<std::string> flags = FiemapFlagNames(e.flags());
  if (e.logical() + e.length() >= size) flags.push_back("eof");
  tail += absl::StrJoin(flags, ",");
  std::string row = absl::StrFormat(
      "%4d: %*d..%*d: %*d..%*d: %6d: %s", index, w.logical, logical,
      w.logical, logical + last, w.physical, physical, w.physical,
      physical + last, len, tail);
  row.erase(row.find_last_not_of(' ') + 1);
  return row + "\n";
}

}  // namespace

std::string FormatFiemap(absl::string_view name, uint64_t size,
                         const std::vector<v1::FiemapExtent>& extents) {
  const uint64_t block = uint64_t{1} << kBlockShift;
  const uint64_t blocks = (size + block - 1) / block;
  const FiemapWidths w = WidthsFor(blocks, extents);
  std::string out = absl::StrFormat(
      "Filesystem type is: cowkv\nFile size of %s is %d (%d block%s of %d "
      "bytes)\n",
      name, size, blocks, blocks == 1 ? "" : "s", block);
  if (!extents.empty()) {
    absl::StrAppendFormat(&out, " ext: %*s %*s length: %*s flags:\n",
                          w.logical * 2 + 3, "logical_offset:",
                          w.physical * 2 + 3, "physical_offset:",
                          w.physical + 1, "expected:");
  }
  // filefrag's count: a new fragment wherever the next extent does not
  // continue the previous one on the device.
  v1::FiemapExtent prev;
  int fragments = 0;
  for (size_t i = 0; i < extents.size(); ++i) {
    const v1::FiemapExtent& e = extents[i];
    uint64_t expected = prev.physical() + e.logical() - prev.logical();
    const uint64_t dense = prev.physical() + prev.length();
    if (e.logical() != 0 && e.physical() != expected && e.physical() != dense) {
      ++fragments;
    } else {
      expected = 0;
      fragments = std::max(fragments, 1);
    }
    out += FiemapRow(static_cast<int>(i), e, expected, size, w);
    prev = e;
  }
  absl::StrAppend(&out, name, ": ", fragments,
                  fragments == 1 ? " extent found\n" : " extents found\n");
  return out;
}

// JSON forms.

Json SubvolumeJson(const v1::SubvolumeInfo& s) {
  Json j = Json::object();
  j["id"] = s.id();
  j["name"] = s.name();
  j["parent_id"] = s.parent_id();
  j["generation"] = s.generation();
  j["last_snapshot"] = s.last_snapshot();
  j["created_unix_ms"] = s.created_unix_ms();
  j["read_only"] = s.read_only();
  j["creation_generation"] = s.creation_generation();
  j["uuid"] = s.uuid();
  j["parent_uuid"] = s.parent_uuid();
  j["received_uuid"] = s.received_uuid();
  j["received_generation"] = s.received_generation();
  return j;
}

Json KeyValueJson(const v1::KeyValue& kv, bool keys_only) {
  Json j = Json::object();
  j["key"] = BytesJson(kv.key());
  if (!keys_only) j["value"] = BytesJson(kv.value());
  j["create_revision"] = kv.create_revision();
  j["mod_revision"] = kv.mod_revision();
  j["version"] = kv.version();
  return j;
}

Json StatJson(const v1::FileStat& st) {
  Json j = Json::object();
  j["ino"] = st.ino();
  j["kind"] = KindShort(st.kind());
  j["mode"] = st.mode();
  j["nlink"] = st.nlink();
  j["size"] = st.size();
  j["bytes"] = st.bytes();
  j["uid"] = st.uid();
  j["gid"] = st.gid();
  j["atime_ns"] = st.atime_ns();
  j["mtime_ns"] = st.mtime_ns();
  j["ctime_ns"] = st.ctime_ns();
  j["btime_ns"] = st.btime_ns();
  j["generation"] = st.generation();
  j["transid"] = st.transid();
  return j;
}

Json ExtentJson(const v1::FiemapExtent& e) {
  Json j = Json::object();
  j["logical"] = e.logical();
  j["physical"] = e.physical();
  j["length"] = e.length();
  j["flags"] = FiemapFlagNames(e.flags());
  return j;
}

Json ScalarFieldsJson(const google::protobuf::Message& m) {
  using google::protobuf::FieldDescriptor;
  Json j = Json::object();
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  const google::protobuf::Reflection* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) continue;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_UINT64:
        j[f->name()] = r->GetUInt64(m, f);
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        j[f->name()] = r->GetUInt32(m, f);
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        j[f->name()] = r->GetInt64(m, f);
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        j[f->name()] = r->GetBool(m, f);
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        j[f->name()] = r->GetDouble(m, f);
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        j[f->name()] = r->GetString(m, f);
        break;
      default:
        break;
    }
  }
  return j;
}

// Text forms.

std::string SubvolumeTable(const std::vector<v1::SubvolumeInfo>& list) {
  Table t({"ID>", "GEN>", "OGEN>", "PARENT>", "CREATED", "FLAGS", "NAME"});
  for (const v1::SubvolumeInfo& s : list) {
    t.Add(
        {absl::StrCat(s.id()), absl::StrCat(s.generation()), absl::StrCat(s.creation_generation()),
         s.parent_id() == 0 ? "-" : absl::StrCat(s.parent_id()), FormatUnixMs(s.created_unix_ms()),
         s.read_only() ? "readonly" : "-", EscapeBytes(s.name())});
  }
  return t.Render();
}

std::string SubvolumeShow(const v1::SubvolumeInfo& s) {
  std::string out = absl::StrFormat(
      "%s\n"
      "\tName:            %s\n"
      "\tSubvolume ID:    %d\n"
      "\tSnapshot of ID:  %s\n"
      "\tGeneration:      %d\n"
      "\tGen at creation: %d\n"
      "\tLast snapshot:   %s\n"
      "\tCreation time:   %s\n"
      "\tFlags:           %s\n"
      "\tSnapshot(s):\n",
      EscapeBytes(s.name()), EscapeBytes(s.name()), s.id(),
      s.parent_id() == 0 ? "-" : absl::StrCat(s.parent_id()), s.generation(),
      s.creation_generation(), s.last_snapshot() == 0 ? "-" : absl::StrCat(s.last_snapshot()),
      FormatUnixMs(s.created_unix_ms()), s.read_only() ? "readonly" : "-");
  // btrfs-progs indents each snapshot's path by four tabs.
  for (const std::string& snap : s.snapshots())
    absl::StrAppend(&out, "\t\t\t\t", EscapeBytes(snap), "\n");
  return out;
}

std::string StatText(absl::string_view path, const v1::FileStat& st,
                     absl::string_view target) {
  std::string name = EscapeBytes(path);
  if (st.kind() == v1::FILE_KIND_SYMLINK) {
    absl::StrAppend(&name, " -> ", EscapeBytes(target));
  }
  return absl::StrFormat(
      "  File: %s\n"
      "  Size: %-15d Bytes: %-12d %s\n"
      " Inode: %-15d Links: %d\n"
      "Access: (%04o/%s)  Uid: %d  Gid: %d\n"
      "Access: %s\nModify: %s\nChange: %s\n Birth: %s\n"
      "Generation: %d  Transid: %d\n",
      name, st.size(), st.bytes(), KindLong(st.kind()), st.ino(), st.nlink(),
      st.mode() & 07777, ModeString(st.kind(), st.mode()), st.uid(), st.gid(),
      FormatUnixNs(st.atime_ns()), FormatUnixNs(st.mtime_ns()),
      FormatUnixNs(st.ctime_ns()), FormatUnixNs(st.btime_ns()),
      st.generation(), st.transid());
}

}  // namespace cli
}  // namespace cowkv
