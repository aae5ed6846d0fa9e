// `cowkv check [--json] [PATH]`
//
// With PATH (offline): runs cowkv::Check on PATH opened read-only and prints
// each problem, then a summary; with --json one object in btrfs-progs'
// format instead. Exit 0 when clean; 1 when problems were found (and one
// stderr line "found N problems"); 1 when PATH cannot be opened, holds no
// cowkv filesystem, or cannot be read at all.
//
// Without PATH (online): the same check run by cowkvd (--server) on the
// device it serves, through Admin.Check (admin.cc).
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "clients/cli/commands.h"
#include "clients/cli/online.h"
#include "clients/cli/progress.h"
#include "cowkv/device.h"
#include "cowkv/store.h"

namespace cowkv {
namespace cli {
namespace {

constexpr char kOp[] = "check";

struct CheckArgs {
  std::string path;
  bool json = false;
  bool progress = false;  // draw the progress line (progress.h)
};

// The device as Check sees it, counting the bytes it reads for the
// progress line. Check only reads.
class CountingDevice : public BlockDevice {
 public:
  CountingDevice(BlockDevice* base, Progress* progress) : base_(base), progress_(progress) {}
  absl::Status ReadAt(uint64_t offset, void* buf, size_t n) override {
    absl::Status s = base_->ReadAt(offset, buf, n);
    if (s.ok()) progress_->Add(n);
    return s;
  }
  absl::Status WriteAt(uint64_t, const void*, size_t) override {
    return absl::FailedPreconditionError("check does not write");
  }
  absl::Status Flush() override { return base_->Flush(); }
  uint64_t Size() const override { return base_->Size(); }

 private:
  BlockDevice* const base_;
  Progress* const progress_;
};

// What Check will read, about: the primary superblock's bytes_used (every
// extent's length; docs/format.md: the copy at 64 KiB, u64 little-endian
// at byte 88). 0 (unknown) when it cannot be read. Only the progress line
// uses it; Check verifies the superblock itself.
uint64_t UsedBytesHint(BlockDevice* dev) {
  constexpr uint64_t kPrimary = 64 << 10, kBytesUsed = 88;
  unsigned char b[8];
  if (!dev->ReadAt(kPrimary + kBytesUsed, b, sizeof(b)).ok()) return 0;
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
  return v <= dev->Size() ? v : 0;
}

std::string Problems(size_t n) {
  return absl::StrCat("found ", n, n == 1 ? " problem" : " problems");
}

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20) {
      out += absl::StrFormat("\\u%04x", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void PrintText(const std::string& path, const CheckReport& r) {
  std::cout << "Checking filesystem on " << path << "\n";
  for (const std::string& p : r.problems) {
    std::cout << "ERROR: " << OneLine(p) << "\n";
  }
  std::cout << "generation:     " << r.generation << "\n"
            << "trees:          " << r.trees << "\n"
            << "nodes:          " << r.nodes << "\n"
            << "items:          " << r.items << "\n"
            << "extents:        " << r.extents << "\n"
            << "used bytes:     " << r.used_bytes << "\n"
            << (r.ok() ? "no problems found" : Problems(r.problems.size()))
            << "\n";
}

void PrintJson(const std::string& path, const CheckReport& r) {
  std::cout << "{\n"
            << "  \"__header\": {\"version\": \"1\"},\n"
            << "  \"path\": " << JsonString(path) << ",\n"
            << "  \"ok\": " << (r.ok() ? "true" : "false") << ",\n"
            << "  \"generation\": " << r.generation << ",\n"
            << "  \"trees\": " << r.trees << ",\n"
            << "  \"nodes\": " << r.nodes << ",\n"
            << "  \"items\": " << r.items << ",\n"
            << "  \"extents\": " << r.extents << ",\n"
            << "  \"used_bytes\": " << r.used_bytes << ",\n"
            << "  \"problems\": [";
  for (size_t i = 0; i < r.problems.size(); ++i) {
    std::cout << (i == 0 ? "\n    " : ",\n    ") << JsonString(r.problems[i]);
  }
  std::cout << (r.problems.empty() ? "]\n" : "\n  ]\n") << "}\n";
}

int RunCheck(const CheckArgs& a) {
  FileDeviceOptions options;
  options.read_only = true;
  absl::StatusOr<std::unique_ptr<FileDevice>> dev =
      FileDevice::Open(a.path, options);
  if (!dev.ok()) return Fail(kOp, dev.status().message(), OpenExitCode(dev.status()));
  if (!HasCowkvSignature(dev->get())) {
    return Fail(kOp, absl::StrCat(a.path, ": no cowkv filesystem found (no ",
                                  "superblock copy has the cowkv magic)"));
  }
  Progress progress(kOp, a.progress ? UsedBytesHint(dev->get()) : 0, a.progress, ProgressDelay());
  CountingDevice counting(dev->get(), &progress);
  absl::StatusOr<CheckReport> report = Check(&counting);
  progress.Finish();
  if (!report.ok()) {
    return Fail(kOp, absl::StrCat(a.path, ": ", report.status().message()));
  }
  if (a.json) {
    PrintJson(a.path, *report);
  } else {
    PrintText(a.path, *report);
  }
  if (report->ok()) return kExitOk;
  return Fail(kOp,
              absl::StrCat(a.path, ": ", Problems(report->problems.size())));
}

}  // namespace

RunFn AddCheck(CLI::App* app, const GlobalsPtr& g) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* cmd = app->add_subcommand(
      "check",
      "Verify a cowkv filesystem (read-only): PATH offline, or without "
      "PATH the one cowkvd serves");
  cmd->add_option("PATH", args->path,
                  "Block device or image file (omitted: ask the server)");
  cmd->add_flag("--json", args->json, "Print the report as JSON");
  return [args, g] {
    CheckArgs a = *args;
    a.json = a.json || g->json;
    Globals quiet_or_json = *g;
    quiet_or_json.json = a.json;
    a.progress = ProgressWanted(quiet_or_json, /*stdout_is_data=*/false);
    return a.path.empty() ? RunOnlineCheck(*g, a.json) : RunCheck(a);
  };
}

}  // namespace cli
}  // namespace cowkv
