// Stream files and manifests; see stream_files.h.
#include "clients/cli/stream_files.h"

#include <fcntl.h>
#include <isa-l.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace cowkv {
namespace cli {
namespace {

constexpr char kMagic[] = "COWKVSND";
constexpr size_t kPreamble = 16;
constexpr size_t kFrame = 12;
constexpr uint32_t kVersion = 1;
constexpr uint16_t kHeaderType = 1;
constexpr size_t kUuid = 16;
// nodesize, sectorsize, uuid, stransid, parent_uuid, parent_stransid,
// ctime_ms, name length.
constexpr size_t kHeaderFixed = 4 + 4 + kUuid + 8 + kUuid + 8 + 8 + 2;
constexpr size_t kMaxHeaderBytes = kPreamble + kFrame + kHeaderFixed + 65535;

uint64_t LittleEndian(absl::string_view b, size_t off, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(b[off + i])} << (8 * i);
  return v;
}

std::string UuidHex(absl::string_view raw) {
  if (raw == std::string(kUuid, '\0')) return "";
  return absl::BytesToHexString(raw);
}

std::string Errno(const std::string& what) {
  return absl::StrCat(what, ": ", std::strerror(errno));
}

absl::Status Mismatch(const StreamEntry& e, absl::string_view field, absl::string_view have,
                      absl::string_view want) {
  return absl::FailedPreconditionError(absl::StrCat(e.file, ": the stream's ", field, " is '", have,
                                                    "', the manifest says '", want, "'"));
}

}  // namespace

absl::StatusOr<StreamHeaderInfo> ParseStreamHeader(absl::string_view b) {
  if (b.size() < 8 || b.substr(0, 8) != absl::string_view(kMagic, 8)) {
    return absl::InvalidArgumentError("not a cowkv send stream (bad magic)");
  }
  if (b.size() < kPreamble + kFrame) return absl::DataLossError("stream truncated in its header");
  if (LittleEndian(b, 8, 4) > kVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("stream version ", LittleEndian(b, 8, 4), " is newer than this cowkv's"));
  }
  const uint64_t len = LittleEndian(b, kPreamble, 4);
  if (LittleEndian(b, kPreamble + 4, 2) != kHeaderType || len < kHeaderFixed) {
    return absl::DataLossError("the stream's first record is not a HEADER");
  }
  absl::string_view p = b.substr(kPreamble + kFrame);
  if (p.size() < len) return absl::DataLossError("stream truncated in its header");
  StreamHeaderInfo h;
  h.nodesize = static_cast<uint32_t>(LittleEndian(p, 0, 4));
  h.sectorsize = static_cast<uint32_t>(LittleEndian(p, 4, 4));
  h.uuid = UuidHex(p.substr(8, kUuid));
  h.stransid = LittleEndian(p, 8 + kUuid, 8);
  h.parent_uuid = UuidHex(p.substr(16 + kUuid, kUuid));
  h.parent_stransid = LittleEndian(p, 16 + 2 * kUuid, 8);
  const uint64_t name_len = LittleEndian(p, kHeaderFixed - 2, 2);
  if (kHeaderFixed + name_len != len) return absl::DataLossError("damaged stream HEADER");
  h.name = std::string(p.substr(kHeaderFixed, name_len));
  if (h.uuid.empty()) return absl::DataLossError("damaged stream HEADER: no uuid");
  return h;
}

absl::StatusOr<StreamHeaderInfo> ReadStreamHeader(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return errno == ENOENT ? absl::NotFoundError(Errno(path)) : absl::UnavailableError(Errno(path));
  }
  std::string buf(kMaxHeaderBytes, '\0');
  const size_t n = std::fread(buf.data(), 1, buf.size(), f);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) return absl::UnavailableError(absl::StrCat(path, ": read failed"));
  buf.resize(n);
  absl::StatusOr<StreamHeaderInfo> h = ParseStreamHeader(buf);
  if (!h.ok())
    return absl::Status(h.status().code(), absl::StrCat(path, ": ", h.status().message()));
  return h;
}

namespace {

constexpr uint16_t kEndType = 7;
constexpr size_t kMaxPayload = 128 * 1024;
constexpr size_t kEndPayload = 8 + 32;

uint32_t Crc32c(absl::string_view a, absl::string_view b) {
  uint32_t c = crc32_iscsi(reinterpret_cast<unsigned char*>(const_cast<char*>(a.data())),
                           static_cast<int>(a.size()), 0xFFFFFFFFu);
  c = crc32_iscsi(reinterpret_cast<unsigned char*>(const_cast<char*>(b.data())),
                  static_cast<int>(b.size()), c);
  return ~c;
}

// Reads exactly n bytes; false at a clean or short end of file.
bool ReadExactly(std::FILE* f, std::string* buf, size_t n) {
  buf->resize(n);
  return std::fread(buf->data(), 1, n, f) == n;
}

absl::Status WalkRecords(std::FILE* f, const std::string& path, StreamWalk* w) {
  auto corrupt = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat(path, ": record ", w->records, " at byte ", w->bytes, ": ", why));
  };
  Sha256 sha;
  std::string frame, payload;
  if (!ReadExactly(f, &frame, kPreamble)) return corrupt("truncated preamble");
  sha.Update(frame);
  w->bytes = kPreamble;
  for (;;) {
    if (!ReadExactly(f, &frame, kFrame)) return corrupt("truncated: the stream ends before END");
    const uint64_t len = LittleEndian(frame, 0, 4);
    const uint64_t type = LittleEndian(frame, 4, 2);
    if (len > kMaxPayload) return corrupt(absl::StrCat("payload of ", len, " bytes"));
    if (!ReadExactly(f, &payload, len)) return corrupt("truncated record");
    if (Crc32c(absl::string_view(frame).substr(0, 8), payload) != LittleEndian(frame, 8, 4)) {
      return corrupt("checksum mismatch");
    }
    if ((w->records == 0) != (type == kHeaderType)) return corrupt("HEADER not first, or twice");
    if (type == kEndType) {
      if (len != kEndPayload) return corrupt("bad END record");
      if (LittleEndian(payload, 0, 8) != w->records) return corrupt("END's record count differs");
      if (absl::BytesToHexString(payload.substr(8)) != sha.FinishHex()) {
        return corrupt("END's SHA-256 differs from the stream's");
      }
      ++w->records;
      w->bytes += kFrame + len;
      return std::fgetc(f) == EOF ? absl::OkStatus() : corrupt("bytes after END");
    }
    sha.Update(frame);
    sha.Update(payload);
    ++w->records;
    w->bytes += kFrame + len;
  }
}

}  // namespace

absl::StatusOr<StreamWalk> WalkStreamFile(const std::string& path) {
  absl::StatusOr<StreamHeaderInfo> h = ReadStreamHeader(path);  // magic and version first
  if (!h.ok()) return h.status();
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::UnavailableError(Errno(path));
  StreamWalk w;
  absl::Status s = WalkRecords(f, path, &w);
  if (std::ferror(f) != 0) s = absl::UnavailableError(absl::StrCat(path, ": read failed"));
  std::fclose(f);
  if (!s.ok()) return s;
  return w;
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::Update(absl::string_view bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), bytes.data(), bytes.size());
}

std::string Sha256::FinishHex() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), out, &n);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(out), n));
}

absl::StatusOr<FileDigest> DigestFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return errno == ENOENT ? absl::NotFoundError(Errno(path)) : absl::UnavailableError(Errno(path));
  }
  Sha256 sha;
  FileDigest d;
  std::string buf(1 << 20, '\0');
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    sha.Update(absl::string_view(buf.data(), n));
    d.bytes += n;
  }
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) return absl::UnavailableError(absl::StrCat(path, ": read failed"));
  d.sha256 = sha.FinishHex();
  return d;
}

absl::Status SyncFile(std::FILE* f, const std::string& what) {
  if (std::fflush(f) != 0) return absl::UnavailableError(Errno(what));
  if (::fsync(::fileno(f)) != 0) return absl::UnavailableError(Errno(what));  // NOLINT(file-io)
  return absl::OkStatus();
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return absl::UnavailableError(Errno(dir));
  const int rc = ::fsync(fd);  // NOLINT(file-io)
  const int err = errno;
  ::close(fd);
  errno = err;
  if (rc != 0) return absl::UnavailableError(Errno(dir));
  return absl::OkStatus();
}

Json ManifestToJson(const Manifest& m) {
  Json j = JsonObject();
  j["kind"] = m.kind;
  if (m.kind == "backup") j["subvolume"] = m.subvolume;
  j["streams"] = Json::array();
  for (const StreamEntry& e : m.streams) {
    Json s = Json::object();
    s["file"] = e.file;
    s["snapshot"] = e.snapshot;
    s["uuid"] = e.uuid;
    s["stransid"] = e.stransid;
    s["parent_uuid"] = e.parent_uuid;
    s["parent_stransid"] = e.parent_stransid;
    s["bytes"] = e.bytes;
    s["sha256"] = e.sha256;
    s["time_unix_ms"] = e.time_unix_ms;
    if (m.kind == "export") s["writable_as"] = e.writable_as;
    j["streams"].push_back(s);
  }
  return j;
}

namespace {

absl::StatusOr<StreamEntry> EntryFromJson(const Json& s) {
  StreamEntry e;
  e.file = s.at("file").get<std::string>();
  e.snapshot = s.at("snapshot").get<std::string>();
  e.uuid = s.at("uuid").get<std::string>();
  e.stransid = s.at("stransid").get<uint64_t>();
  e.parent_uuid = s.at("parent_uuid").get<std::string>();
  e.parent_stransid = s.at("parent_stransid").get<uint64_t>();
  e.bytes = s.at("bytes").get<uint64_t>();
  e.sha256 = s.at("sha256").get<std::string>();
  e.time_unix_ms = s.at("time_unix_ms").get<uint64_t>();
  if (s.contains("writable_as")) e.writable_as = s.at("writable_as").get<std::string>();
  // A file name, never a path: a manifest must not reach outside its directory.
  if (e.file.empty() || e.file.find('/') != std::string::npos || e.file[0] == '.') {
    return absl::InvalidArgumentError(absl::StrCat("bad stream file name '", e.file, "'"));
  }
  return e;
}

}  // namespace

absl::StatusOr<Manifest> ManifestFromJson(const Json& j) {
  Manifest m;
  try {
    if (j.at("__header").at("version").get<std::string>() != "1") {
      return absl::FailedPreconditionError("manifest version is not 1");
    }
    m.kind = j.at("kind").get<std::string>();
    if (m.kind != "backup" && m.kind != "export") {
      return absl::InvalidArgumentError(absl::StrCat("unknown manifest kind '", m.kind, "'"));
    }
    if (m.kind == "backup") m.subvolume = j.at("subvolume").get<std::string>();
    for (const Json& s : j.at("streams")) {
      absl::StatusOr<StreamEntry> e = EntryFromJson(s);
      if (!e.ok()) return e.status();
      m.streams.push_back(*std::move(e));
    }
  } catch (const Json::exception& ex) {
    return absl::InvalidArgumentError(absl::StrCat("not a cowkv manifest: ", ex.what()));
  }
  return m;
}

absl::StatusOr<Manifest> LoadManifest(const std::string& dir, const std::string& name) {
  const std::string path = absl::StrCat(dir, "/", name);
  std::ifstream in(path);
  if (!in) {
    return errno == ENOENT ? absl::NotFoundError(Errno(path)) : absl::UnavailableError(Errno(path));
  }
  Json j = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": not JSON"));
  absl::StatusOr<Manifest> m = ManifestFromJson(j);
  if (!m.ok())
    return absl::Status(m.status().code(), absl::StrCat(path, ": ", m.status().message()));
  return m;
}

absl::Status SaveManifest(const std::string& dir, const std::string& name, const Manifest& m) {
  const std::string path = absl::StrCat(dir, "/", name);
  const std::string tmp = absl::StrCat(path, ".tmp");
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return absl::UnavailableError(Errno(tmp));
  const std::string text = DumpJson(ManifestToJson(m));
  absl::Status s = std::fwrite(text.data(), 1, text.size(), f) == text.size()
                       ? SyncFile(f, tmp)
                       : absl::UnavailableError(Errno(tmp));
  if (std::fclose(f) != 0 && s.ok()) s = absl::UnavailableError(Errno(tmp));
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
    s = absl::UnavailableError(Errno(path));
  if (!s.ok()) {
    std::remove(tmp.c_str());
    return s;
  }
  return SyncDir(dir);
}

absl::Status CheckBackupChain(const std::vector<StreamEntry>& streams) {
  for (size_t i = 0; i < streams.size(); ++i) {
    const StreamEntry& e = streams[i];
    if (i == 0) {
      if (!e.parent_uuid.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("broken chain: the first stream ", e.file, " is incremental (on ",
                         e.parent_uuid, ") but no stream before it is its parent"));
      }
      continue;
    }
    const StreamEntry& p = streams[i - 1];
    if (e.parent_uuid.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("broken chain: ", e.file, " is a full stream after ", p.file));
    }
    if (e.parent_uuid != p.uuid || e.parent_stransid != p.stransid) {
      return absl::FailedPreconditionError(
          absl::StrCat("broken chain: ", e.file, " is a difference from ", e.parent_uuid,
                       " at generation ", e.parent_stransid, ", not from the stream before it, ",
                       p.file, " (", p.uuid, " at generation ", p.stransid, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckExportOrder(const std::vector<StreamEntry>& streams) {
  std::set<std::pair<std::string, uint64_t>> seen;
  std::set<std::string> names;
  for (const StreamEntry& e : streams) {
    if (!names.insert(e.snapshot).second) {
      return absl::FailedPreconditionError(
          absl::StrCat("two streams make the snapshot '", e.snapshot, "'"));
    }
    if (!e.parent_uuid.empty() && seen.count({e.parent_uuid, e.parent_stransid}) == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("broken export: the parent of ", e.file, " (", e.parent_uuid,
                       " at generation ", e.parent_stransid, ") is in no stream before it"));
    }
    seen.insert({e.uuid, e.stransid});
  }
  return absl::OkStatus();
}

absl::Status CheckStreamFile(const std::string& dir, const StreamEntry& e) {
  const std::string path = absl::StrCat(dir, "/", e.file);
  absl::StatusOr<FileDigest> d = DigestFile(path);
  if (!d.ok()) return d.status();
  if (d->bytes != e.bytes || d->sha256 != e.sha256) {
    return absl::DataLossError(absl::StrCat(path, ": damaged: ", d->bytes, " bytes with SHA-256 ",
                                            d->sha256, ", the manifest says ", e.bytes,
                                            " bytes with ", e.sha256));
  }
  absl::StatusOr<StreamHeaderInfo> h = ReadStreamHeader(path);
  if (!h.ok()) return h.status();
  if (h->uuid != e.uuid) return Mismatch(e, "uuid", h->uuid, e.uuid);
  if (h->stransid != e.stransid) {
    return Mismatch(e, "stransid", absl::StrCat(h->stransid), absl::StrCat(e.stransid));
  }
  if (h->parent_uuid != e.parent_uuid)
    return Mismatch(e, "parent uuid", h->parent_uuid, e.parent_uuid);
  if (h->parent_stransid != e.parent_stransid) {
    return Mismatch(e, "parent stransid", absl::StrCat(h->parent_stransid),
                    absl::StrCat(e.parent_stransid));
  }
  return absl::OkStatus();
}

}  // namespace cli
}  // namespace cowkv
