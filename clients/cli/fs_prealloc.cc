// `cowkv fs fallocate`: fallocate(2) through Files.Fallocate, with
// fallocate(1)'s and xfs_io's habits.
//
//   cowkv fs fallocate [-k|--keep-size] [-p|--punch-hole] [-z|--zero-range]
//                      [-o|--offset BYTES] -l|--length BYTES PATH
//
// No flag preallocates the range's holes (extents that read as zeros; the
// file grows to the range's end); -k keeps the size (the range may lie past
// EOF); -p punches a hole (it implies -k, as fallocate(1)'s --punch-hole);
// -z zeroes the range (with preallocated extents; -k keeps the size). -p
// with -z is refused (EINVAL). Prints nothing, or the file's stat with --json.
#include <string>
#include <vector>

#include "clients/cli/fs_commands.h"
#include "clients/cli/output.h"

namespace cowkv {
namespace cli {
namespace {

struct PreallocArgs {
  std::string subvolume = "default";
  std::vector<std::string> paths;
  std::string offset, length;
  bool keep_size = false;
  bool punch_hole = false;
  bool zero_range = false;
};

uint32_t ModeOf(const PreallocArgs& a) {
  uint32_t mode = 0;
  // fallocate(1): --punch-hole implies --keep-size.
  if (a.keep_size || a.punch_hole) mode |= v1::FALLOCATE_FLAG_KEEP_SIZE;
  if (a.punch_hole) mode |= v1::FALLOCATE_FLAG_PUNCH_HOLE;
  if (a.zero_range) mode |= v1::FALLOCATE_FLAG_ZERO_RANGE;
  return mode;
}

int RunFallocate(const PreallocArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs fallocate";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::FallocateRequest req;
  req.set_subvolume(a.subvolume);
  req.set_path(a.paths.front());
  req.set_mode(ModeOf(a));
  req.set_offset(SizeValue(a.offset));
  req.set_length(SizeValue(a.length));
  v1::FileStat st;
  grpc::Status s = Call(*conn, conn->files(), &v1::Files::Stub::Fallocate, req, &st);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (!g.json) return kExitOk;
  Json j = JsonObject();
  j["path"] = a.paths.front();
  j["stat"] = StatJson(st);
  return Emit(kOp, DumpJson(j));
}

}  // namespace

void AddFsPrealloc(CommandGroup* group, const GlobalsPtr& g) {
  auto a = std::make_shared<PreallocArgs>();
  CLI::App* cmd = group->Add(
      "fallocate", "Preallocate, punch a hole in or zero a range of a file (fallocate(2))",
      [a, g] { return RunFallocate(*a, *g); });
  AddFsSubvolumeOption(cmd, &a->subvolume);
  cmd->add_flag("-k,--keep-size", a->keep_size, "Do not change the file's size");
  cmd->add_flag("-p,--punch-hole", a->punch_hole, "Make the range a hole (implies -k)");
  cmd->add_flag("-z,--zero-range", a->zero_range, "Zero the range");
  AddSizeOption(cmd, "-o,--offset", &a->offset, "First byte of the range");
  AddSizeOption(cmd, "-l,--length", &a->length, "Bytes of the range")->required();
  cmd->add_option("PATH", a->paths, "Path of a regular file")->required()->expected(1);
}

}  // namespace cli
}  // namespace cowkv
