// Output of the online commands: tables for people, JSON for scripts, and
// the filefrag-style extent map. Pure functions (no I/O), so that
// output_test.cc can pin every format.
//
// JSON conventions (docs/cli.md): every --json output is one object whose
// first member is "__header": {"version": "1"} (btrfs-progs' format); keys,
// values and other bytes are a JSON string when they are valid UTF-8 and
// {"base64": "..."} otherwise; times are numbers in the API's units.
#ifndef COWKV_CLIENTS_CLI_OUTPUT_H_
#define COWKV_CLIENTS_CLI_OUTPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cowkv/v1/admin.pb.h"
#include "cowkv/v1/files.pb.h"
#include "cowkv/v1/kv.pb.h"
#include "cowkv/v1/subvolumes.pb.h"
#include "nlohmann/json.hpp"

namespace cowkv {
namespace cli {

using Json = nlohmann::ordered_json;

// True when `s` is well-formed UTF-8.
bool IsUtf8(absl::string_view s);

// Bytes for a person, on one line: valid UTF-8 as is, except '\\', tab,
// newline, carriage return and other control bytes (C escapes, \xNN), and
// bytes that are not UTF-8 (\xNN).
std::string EscapeBytes(absl::string_view s);

// Bytes as JSON: a string if valid UTF-8, else {"base64": "..."}.
Json BytesJson(absl::string_view s);

// The inverse of BytesJson, as the txn spec takes bytes: a string (its UTF-8
// bytes) or {"base64": "..."}. INVALID_ARGUMENT for anything else.
absl::StatusOr<std::string> BytesFromJson(const Json& j, absl::string_view what);

// An object that starts with "__header": {"version": "1"}.
Json JsonObject();

// `j` pretty-printed (2 spaces) with a trailing newline.
std::string DumpJson(const Json& j);

// A table with aligned columns, two spaces apart; columns whose name ends
// in '>' are right-aligned (the '>' is not printed). No trailing spaces.
class Table {
 public:
  explicit Table(std::vector<std::string> columns);
  void Add(std::vector<std::string> row);
  std::string Render() const;
  size_t rows() const { return rows_.size(); }

 private:
  std::vector<std::string> names_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

// "2026-11-23 00:17:00" in the local time zone.
std::string FormatUnixMs(uint64_t ms);
std::string FormatUnixNs(int64_t ns);

// ls -l's mode column: "drwxr-xr-x", "-rw-r--r--", "lrwxrwxrwx".
std::string ModeString(v1::FileKind kind, uint32_t mode);

// "regular file", "directory", "symbolic link"; and "regular", ... for JSON.
std::string KindLong(v1::FileKind kind);
std::string KindShort(v1::FileKind kind);

// The extents of a file as `filefrag -v` prints them, in 4 KiB blocks
// (inline extents in bytes, as filefrag does):
//
//   Filesystem type is: cowkv
//   File size of NAME is SIZE (N blocks of 4096 bytes)
//    ext:     logical_offset:        physical_offset: length:   expected: flags:
//      0:        0..       3:      12345..     12348:      4:             last,shared,eof
//   NAME: 1 extent found
//
// Flags: last, not_aligned, inline, unwritten, shared (FIEMAP_EXTENT_*), then eof when
// the extent reaches the file size. "extents found" counts runs that are not
// physically contiguous with the previous extent, as filefrag does; the
// `expected:` column shows where such a run would have continued.
std::string FormatFiemap(absl::string_view name, uint64_t size,
                         const std::vector<v1::FiemapExtent>& extents);

// The flag names of a FiemapExtent ("last", "shared", ...).
std::vector<std::string> FiemapFlagNames(uint32_t flags);

// JSON forms of the API's messages (field names as in the protos).
Json SubvolumeJson(const v1::SubvolumeInfo& s);
Json KeyValueJson(const v1::KeyValue& kv, bool keys_only);
Json StatJson(const v1::FileStat& st);
Json ExtentJson(const v1::FiemapExtent& e);
// Every field of a message of integer and bool fields (StatsResponse,
// CheckResponse counters), in field order.
Json ScalarFieldsJson(const google::protobuf::Message& m);

// `btrfs subvolume list`-like table (ID, GEN, PARENT, RO, CREATED, NAME).
std::string SubvolumeTable(const std::vector<v1::SubvolumeInfo>& list);

// `btrfs subvolume show`-like block for one subvolume.
std::string SubvolumeShow(const v1::SubvolumeInfo& s);

// stat(1)-like block for one file; `target` is a symlink's target.
std::string StatText(absl::string_view path, const v1::FileStat& st,
                     absl::string_view target);

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_OUTPUT_H_
