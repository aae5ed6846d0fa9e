// `cowkv fs chmod|chown|touch|setfattr|getfattr`: a file's attributes
// (Files.SetAttr) and extended attributes (Files.*Xattr*).
//
//   cowkv fs chmod OCTAL PATH...
//   cowkv fs chown UID[:GID] | :GID PATH...
//   cowkv fs touch [-a | -m] [--time NS] [-c] PATH...
//   cowkv fs setfattr -n NAME [-v VALUE] [--create | --replace] PATH...
//   cowkv fs setfattr -x NAME PATH...
//   cowkv fs getfattr [-n NAME | -d] [-e text|hex|base64] PATH...
//
// setfattr and getfattr follow attr's setfattr(1) and getfattr(1): VALUE
// "0x..." is hex, "0s..." base64, anything else the bytes as given;
// getfattr prints "# file: PATH" and then names (or name=value with -n or
// -d), values as text in quotes when printable, else "0s" base64 (-e picks).
//
// `touch` sets the access and modification times (only one with -a or -m)
// to now or to --time (nanoseconds since the epoch), and creates a missing
// file unless -c. Every one prints nothing; --json prints each path's
// attributes afterwards. Symlinks are changed themselves, never followed.
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "clients/cli/fs_commands.h"
#include "clients/cli/output.h"

namespace cowkv {
namespace cli {
namespace {

struct AttrArgs {
  std::string subvolume = "default";
  std::vector<std::string> paths;
  std::string mode, owner, time;
  bool atime_only = false, mtime_only = false, no_create = false;
  std::string name, value, remove, encoding;
  bool create = false, replace = false, dump = false;
};

// Sends `req` for each path; prints {"__header", "paths": [{path, stat}]}
// for --json.
int SetEach(const char* op, const AttrArgs& a, const Globals& g, v1::SetAttrRequest req,
            bool create_missing) {
  int rc = 0;
  auto conn = Connect(op, g, &rc);
  if (!conn) return rc;
  Json out = Json::array();
  for (const std::string& path : a.paths) {
    req.set_subvolume(a.subvolume);
    req.set_path(path);
    v1::FileStat st;
    grpc::Status s = Call(*conn, conn->files(), &v1::Files::Stub::SetAttr, req, &st);
    if (s.error_code() == grpc::StatusCode::NOT_FOUND && create_missing) {
      v1::CreateFileRequest cr;
      cr.set_subvolume(a.subvolume);
      cr.set_path(path);
      s = Call(*conn, conn->files(), &v1::Files::Stub::Create, cr, &st);
      if (s.error_code() == grpc::StatusCode::ALREADY_EXISTS) s = grpc::Status::OK;
      if (s.ok()) s = Call(*conn, conn->files(), &v1::Files::Stub::SetAttr, req, &st);
    }
    if (!s.ok()) return RpcFail(op, s, g);
    Json one = Json::object();
    one["path"] = path;
    one["stat"] = StatJson(st);
    out.push_back(one);
  }
  if (!g.json) return kExitOk;
  Json j = JsonObject();
  j["paths"] = out;
  return Emit(op, DumpJson(j));
}

int RunChmod(const AttrArgs& a, const Globals& g) {
  v1::SetAttrRequest req;
  req.set_fields(v1::SET_ATTR_MODE);
  req.set_mode(ModeValue(a.mode));
  return SetEach("fs chmod", a, g, req, false);
}

// "UID", "UID:GID", ":GID" (and "UID:" = UID only).
int RunChown(const AttrArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs chown";
  const size_t colon = a.owner.find(':');
  const std::string user = a.owner.substr(0, colon);
  const std::string group = colon == std::string::npos ? "" : a.owner.substr(colon + 1);
  v1::SetAttrRequest req;
  uint32_t id = 0;
  if (!user.empty()) {
    if (!absl::SimpleAtoi(user, &id)) {
      return Fail(kOp, absl::StrCat("'", user, "' is not a numeric user id"), kExitUsage);
    }
    req.set_fields(req.fields() | v1::SET_ATTR_UID);
    req.set_uid(id);
  }
  if (!group.empty()) {
    if (!absl::SimpleAtoi(group, &id)) {
      return Fail(kOp, absl::StrCat("'", group, "' is not a numeric group id"), kExitUsage);
    }
    req.set_fields(req.fields() | v1::SET_ATTR_GID);
    req.set_gid(id);
  }
  if (req.fields() == 0) {
    return Fail(kOp, "give UID, UID:GID or :GID", kExitUsage);
  }
  return SetEach(kOp, a, g, req, false);
}

int RunTouch(const AttrArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs touch";
  int64_t ns = 0;
  if (!a.time.empty() && !absl::SimpleAtoi(a.time, &ns)) {
    return Fail(kOp, absl::StrCat("--time: '", a.time, "' is not nanoseconds"), kExitUsage);
  }
  const bool now = a.time.empty();
  v1::SetAttrRequest req;
  uint32_t fields = 0;
  if (!a.mtime_only) fields |= now ? v1::SET_ATTR_ATIME_NOW : v1::SET_ATTR_ATIME;
  if (!a.atime_only) fields |= now ? v1::SET_ATTR_MTIME_NOW : v1::SET_ATTR_MTIME;
  req.set_fields(fields);
  req.set_atime_ns(ns);
  req.set_mtime_ns(ns);
  return SetEach(kOp, a, g, req, !a.no_create);
}

// setfattr / getfattr.

// setfattr(1)'s value encodings: 0x hex, 0s base64, else as given.
bool DecodeValue(const std::string& text, std::string* out) {
  if (absl::StartsWithIgnoreCase(text, "0x")) {
    const std::string hex = text.substr(2);
    if (hex.size() % 2 != 0 ||
        hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      return false;
    }
    *out = absl::HexStringToBytes(hex);
    return true;
  }
  if (absl::StartsWithIgnoreCase(text, "0s")) return absl::Base64Unescape(text.substr(2), out);
  *out = text;
  return true;
}

std::string EncodeValue(const std::string& v, const std::string& encoding) {
  if (encoding == "hex") return "0x" + absl::BytesToHexString(v);
  if (encoding == "base64") return "0s" + absl::Base64Escape(v);
  bool printable = true;
  for (const char c : v) printable = printable && c >= 0x20 && c < 0x7f;
  if (encoding.empty() && !printable) return "0s" + absl::Base64Escape(v);
  return "\"" + absl::CEscape(v) + "\"";
}

int RunSetfattr(const AttrArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs setfattr";
  if (a.name.empty() == a.remove.empty()) {
    return Fail(kOp, "give -n NAME (to set) or -x NAME (to remove)", kExitUsage);
  }
  std::string value;
  if (!DecodeValue(a.value, &value)) {
    return Fail(kOp, absl::StrCat("-v: '", a.value, "' is not valid 0x hex or 0s base64"),
                kExitUsage);
  }
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  for (const std::string& path : a.paths) {
    grpc::Status s;
    if (!a.remove.empty()) {
      v1::RemoveXattrRequest req;
      req.set_subvolume(a.subvolume);
      req.set_path(path);
      req.set_name(a.remove);
      v1::RemoveXattrResponse resp;
      s = Call(*conn, conn->files(), &v1::Files::Stub::RemoveXattr, req, &resp);
    } else {
      v1::SetXattrRequest req;
      req.set_subvolume(a.subvolume);
      req.set_path(path);
      req.set_name(a.name);
      req.set_value(value);
      req.set_flags(a.create    ? v1::XATTR_FLAG_CREATE
                    : a.replace ? v1::XATTR_FLAG_REPLACE
                                : v1::XATTR_FLAG_NONE);
      v1::SetXattrResponse resp;
      s = Call(*conn, conn->files(), &v1::Files::Stub::SetXattr, req, &resp);
    }
    if (!s.ok()) return RpcFail(kOp, s, g);
  }
  if (!g.json) return kExitOk;
  Json j = JsonObject();
  j[a.remove.empty() ? "set" : "removed"] = a.remove.empty() ? a.name : a.remove;
  j["paths"] = a.paths;
  return Emit(kOp, DumpJson(j));
}

int RunGetfattr(const AttrArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs getfattr";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  std::string text;
  Json files = Json::array();
  const bool values = a.dump || !a.name.empty();
  for (const std::string& path : a.paths) {
    std::vector<std::string> names;
    if (!a.name.empty()) {
      names.push_back(a.name);
    } else {
      v1::ListXattrsRequest req;
      req.set_subvolume(a.subvolume);
      req.set_path(path);
      v1::ListXattrsResponse resp;
      grpc::Status s = Call(*conn, conn->files(), &v1::Files::Stub::ListXattrs, req, &resp);
      if (!s.ok()) return RpcFail(kOp, s, g);
      names.assign(resp.names().begin(), resp.names().end());
    }
    Json one = Json::object();
    one["path"] = path;
    Json xattrs = Json::object();
    absl::StrAppend(&text, "# file: ", EscapeBytes(path), "\n");
    for (const std::string& name : names) {
      if (!values) {
        absl::StrAppend(&text, EscapeBytes(name), "\n");
        continue;
      }
      v1::GetXattrRequest req;
      req.set_subvolume(a.subvolume);
      req.set_path(path);
      req.set_name(name);
      v1::GetXattrResponse resp;
      grpc::Status s = Call(*conn, conn->files(), &v1::Files::Stub::GetXattr, req, &resp);
      if (!s.ok()) return RpcFail(kOp, s, g);
      absl::StrAppend(&text, EscapeBytes(name), "=", EncodeValue(resp.value(), a.encoding), "\n");
      xattrs[name] = BytesJson(resp.value());
    }
    text += "\n";
    if (values) {
      one["xattrs"] = xattrs;
    } else {
      one["names"] = names;
    }
    files.push_back(one);
  }
  if (!g.json) return Emit(kOp, text);
  Json j = JsonObject();
  j["files"] = files;
  return Emit(kOp, DumpJson(j));
}

CLI::App* AddAttrCommand(CommandGroup* group, const std::string& name, const std::string& help,
                         RunFn run, const std::shared_ptr<AttrArgs>& a) {
  CLI::App* cmd = group->Add(name, help, std::move(run));
  AddFsSubvolumeOption(cmd, &a->subvolume);
  return cmd;
}

}  // namespace

void AddFsAttr(CommandGroup* group, const GlobalsPtr& g) {
  auto a = std::make_shared<AttrArgs>();
  CLI::App* chmod = AddAttrCommand(
      group, "chmod", "Set permission bits", [a, g] { return RunChmod(*a, *g); }, a);
  chmod->add_option("MODE", a->mode, "Permission bits, octal (at most 07777)")
      ->required()
      ->check(CLI::Validator(
          [](std::string& text) {
            const bool octal = !text.empty() && text.size() <= 5 &&
                               text.find_first_not_of("01234567") == std::string::npos &&
                               std::stoul(text, nullptr, 8) <= 07777;
            return octal ? std::string() : "'" + text + "' is not octal permission bits";
          },
          "OCTAL"));
  chmod->add_option("PATH", a->paths, "Paths")->required();
  CLI::App* chown = AddAttrCommand(
      group, "chown", "Set the owner (numeric ids)", [a, g] { return RunChown(*a, *g); }, a);
  chown->add_option("OWNER", a->owner, "UID, UID:GID or :GID")->required();
  chown->add_option("PATH", a->paths, "Paths")->required();
  CLI::App* touch = AddAttrCommand(
      group, "touch", "Set access and modification times", [a, g] { return RunTouch(*a, *g); }, a);
  CLI::Option* at = touch->add_flag("-a", a->atime_only, "Only the access time");
  touch->add_flag("-m", a->mtime_only, "Only the modification time")->excludes(at);
  touch->add_option("--time", a->time, "Nanoseconds since the epoch (default: now)")
      ->type_name("NS");
  touch->add_flag("-c,--no-create", a->no_create, "Do not create missing files");
  touch->add_option("PATH", a->paths, "Paths")->required();
  CLI::App* setf = AddAttrCommand(
      group, "setfattr", "Set or remove an extended attribute",
      [a, g] { return RunSetfattr(*a, *g); }, a);
  CLI::Option* n = setf->add_option("-n,--name", a->name, "Name to set");
  setf->add_option("-v,--value", a->value, "Value: text, 0x hex or 0s base64 (default empty)")
      ->needs(n);
  setf->add_option("-x,--remove", a->remove, "Name to remove")->excludes(n);
  CLI::Option* create =
      setf->add_flag("--create", a->create, "Fail if the name is set (XATTR_CREATE)")->needs(n);
  setf->add_flag("--replace", a->replace, "Fail if the name is not set (XATTR_REPLACE)")
      ->needs(n)
      ->excludes(create);
  setf->add_option("PATH", a->paths, "Paths")->required();
  CLI::App* getf = AddAttrCommand(
      group, "getfattr", "Print extended attributes", [a, g] { return RunGetfattr(*a, *g); }, a);
  CLI::Option* gn = getf->add_option("-n,--name", a->name, "Only this one, with its value");
  getf->add_flag("-d,--dump", a->dump, "Every name with its value")->excludes(gn);
  getf->add_option("-e,--encoding", a->encoding, "Values as text, hex or base64")
      ->check(CLI::IsMember({"text", "hex", "base64"}));
  getf->add_option("PATH", a->paths, "Paths")->required();
}

}  // namespace cli
}  // namespace cowkv
