// `cowkv mkfs [--size BYTES] [--nodesize N] [--force] PATH`
//
// Formats PATH, an existing regular file or block device, or creates PATH as
// a sparse regular file of --size bytes when it does not exist. Like
// mkfs.btrfs it refuses, unless --force:
//   - a device that already holds a cowkv or another recognisable
//     filesystem (fs_signature.h);
//   - a --size that differs from an existing file's size (with --force the
//     file is truncated or extended to it). A block device is always used
//     whole: a different --size is refused even with --force, because the
//     facade cannot format part of a device.
// On success it prints a summary in the style of mkfs.btrfs.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "clients/cli/commands.h"
#include "clients/cli/fs_signature.h"
#include "cowkv/device.h"
#include "cowkv/store.h"

namespace cowkv {
namespace cli {

absl::StatusOr<uint64_t> ParseSize(absl::string_view text) {
  const absl::Status invalid = absl::InvalidArgumentError(
      absl::StrCat("'", text, "' is not a size (a whole number of bytes, ",
                   "optionally with a K, M, G, T, P or E suffix)"));
  size_t n = 0;
  while (n < text.size() && absl::ascii_isdigit(text[n])) ++n;
  uint64_t value = 0;
  if (n == 0 || !absl::SimpleAtoi(text.substr(0, n), &value)) return invalid;
  const absl::string_view suffix = text.substr(n);
  int shift = 0;
  if (!suffix.empty()) {
    const size_t unit = absl::string_view("KMGTPE").find(
        absl::ascii_toupper(suffix[0]));
    const std::string rest = absl::AsciiStrToLower(suffix.substr(1));
    if (unit == absl::string_view::npos ||
        (!rest.empty() && rest != "ib" && rest != "b")) {
      return invalid;
    }
    shift = 10 * static_cast<int>(unit + 1);
  }
  if (shift > 0 && value > (~uint64_t{0} >> shift)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", text, "' is too large"));
  }
  return value << shift;
}

namespace {

constexpr char kOp[] = "mkfs";
constexpr uint32_t kSectorsize = 4096;

struct MkfsArgs {
  std::string path;
  std::string size;  // empty = not given
  std::string nodesize = std::to_string(kDefaultNodesize);
  bool force = false;
};

// CLI11 validators: a bad value is a usage error (exit 2).
std::string ValidateSize(std::string& text) {
  absl::StatusOr<uint64_t> v = ParseSize(text);
  if (!v.ok()) return std::string(v.status().message());
  if (*v == 0) return "size must be greater than 0";
  return "";
}

std::string ValidateNodesize(std::string& text) {
  absl::StatusOr<uint64_t> v = ParseSize(text);
  if (!v.ok()) return std::string(v.status().message());
  if (*v < kMinNodesize || *v > kMaxNodesize || (*v & (*v - 1)) != 0) {
    return absl::StrCat(text, " is not a power of two from ", kMinNodesize,
                        " to ", kMaxNodesize);
  }
  return "";
}

// "1.00GiB", as btrfs-progs' pretty_size.
std::string PrettySize(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return absl::StrCat(bytes, "B");
  return absl::StrFormat("%.2f%s", v, units[u]);
}

std::string RandomFsid() {
  std::random_device rd;
  std::string fsid(16, '\0');
  for (char& c : fsid) c = static_cast<char>(rd());
  return fsid;
}

// The refusals that apply to an existing PATH; OK when formatting may go
// ahead. With --force, resizes a regular file whose size differs.
absl::Status CheckExisting(const MkfsArgs& a, FileDevice* dev,
                           std::optional<uint64_t> size) {
  absl::StatusOr<std::optional<FsSignature>> sig = DetectFsSignature(dev);
  if (!sig.ok()) return sig.status();
  if (sig->has_value() && !a.force) {
    const FsSignature& s = **sig;
    std::string where =
        s.offset ? absl::StrCat(" (signature at byte ", *s.offset, ")") : "";
    return absl::FailedPreconditionError(
        absl::StrCat(a.path, ": appears to contain an existing ", s.type,
                     " filesystem", where, "; use --force to overwrite it"));
  }
  if (!size || *size == dev->Size()) return absl::OkStatus();
  if (dev->is_block_device()) {
    return absl::InvalidArgumentError(absl::StrCat(
        a.path, ": --size ", *size, " differs from the block device's size ",
        dev->Size(), "; a block device is always formatted whole"));
  }
  if (!a.force) {
    return absl::FailedPreconditionError(absl::StrCat(
        a.path, ": file is ", dev->Size(), " bytes but --size asks for ",
        *size, "; use --force to resize it"));
  }
  if (::truncate(a.path.c_str(), static_cast<off_t>(*size)) != 0) {
    return absl::InternalError(
        absl::StrCat("truncate ", a.path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

void PrintSummary(const std::string& path, uint64_t size, uint32_t nodesize,
                  const std::string& fsid, bool created) {
  std::cout << "cowkv mkfs " << kVersion << "\n\n"
            << "Path:               " << path
            << (created ? " (new sparse file)" : "") << "\n"
            << "Filesystem ID:      " << absl::BytesToHexString(fsid) << "\n"
            << "Filesystem size:    " << PrettySize(size) << " (" << size
            << " bytes)\n"
            << "Node size:          " << nodesize << "\n"
            << "Sector size:        " << kSectorsize << "\n";
}

int RunMkfs(const MkfsArgs& a) {
  std::optional<uint64_t> size;
  if (!a.size.empty()) size = *ParseSize(a.size);  // validated by CLI11
  const uint32_t nodesize = static_cast<uint32_t>(*ParseSize(a.nodesize));

  FileDeviceOptions probe_options;
  probe_options.read_only = true;
  absl::StatusOr<std::unique_ptr<FileDevice>> probe =
      FileDevice::Open(a.path, probe_options);
  const bool create = absl::IsNotFound(probe.status());
  if (create && !size) {
    return Fail(kOp, absl::StrCat(a.path, ": does not exist; give --size to "
                                          "create it as a sparse file"));
  }
  if (!create && !probe.ok()) return Fail(kOp, probe.status().message(), OpenExitCode(probe.status()));
  if (!create) {
    absl::Status s = CheckExisting(a, probe->get(), size);
    if (!s.ok()) return Fail(kOp, s.message());
    probe->reset();
  }

  FileDeviceOptions options;
  options.create_size = create ? *size : 0;
  absl::StatusOr<std::unique_ptr<FileDevice>> dev =
      FileDevice::Open(a.path, options);
  if (!dev.ok()) return Fail(kOp, dev.status().message(), OpenExitCode(dev.status()));
  MkfsOptions mkfs;
  mkfs.nodesize = nodesize;
  mkfs.sectorsize = kSectorsize;
  mkfs.fsid = RandomFsid();
  absl::Status s = Store::Mkfs(dev->get(), mkfs);
  if (!s.ok()) {
    dev->reset();
    if (create) ::unlink(a.path.c_str());  // leave nothing half-made behind
    return Fail(kOp, absl::StrCat(a.path, ": ", s.message()));
  }
  PrintSummary(a.path, (*dev)->Size(), nodesize, mkfs.fsid, create);
  return kExitOk;
}

}  // namespace

RunFn AddMkfs(CLI::App* app) {
  auto args = std::make_shared<MkfsArgs>();
  CLI::App* cmd = app->add_subcommand(
      "mkfs", "Create a cowkv filesystem on a device or image file");
  cmd->add_option("PATH", args->path,
                  "Block device or image file (created when absent)")
      ->required();
  cmd->add_option("--size", args->size,
                  "Size of a new image file, e.g. 1G or 512M; on an existing "
                  "file must match its size unless --force")
      ->type_name("SIZE")
      ->check(CLI::Validator(ValidateSize, ""));
  cmd->add_option("-n,--nodesize", args->nodesize,
                  "Tree node size: a power of two from 4K to 64K")
      ->type_name("SIZE")
      ->check(CLI::Validator(ValidateNodesize, ""))
      ->capture_default_str();
  cmd->add_flag("-f,--force", args->force,
                "Overwrite an existing filesystem; resize an existing file "
                "to --size");
  return [args] { return RunMkfs(*args); };
}

}  // namespace cli
}  // namespace cowkv
