// cowkv man [--dir DIR] [--cowkvd PATH] [PAGE]: manual pages generated from
// the command tree itself (as completion.cc), so they cannot fall behind
// the commands: cowkv(1) (global options, the commands, environment, exit
// status), one page per command, cowkv-COMMAND(1), with every subcommand's
// synopsis, arguments and options, and cowkvd(8) from `cowkvd --help`
// (cowkvd's flags live in its own binary; CLI11's help layout is parsed).
//
// Without --dir, prints PAGE (cowkv, a command name or cowkvd) on stdout:
// `cowkv man kv | man -l -`. With --dir, writes DIR/man1/cowkv.1,
// DIR/man1/cowkv-*.1 and, when cowkvd is found (--cowkvd, else beside
// cowkv), DIR/man8/cowkvd.8, printing each path written.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "clients/cli/commands.h"
#include "clients/cli/man_page.h"
#include "clients/cli/online.h"
#include "clients/cli/output.h"

namespace cowkv {
namespace cli {
namespace {

struct ManArgs {
  std::string dir;
  std::string cowkvd;
  std::string page = "cowkv";
};

// `path --help`'s stdout (at most 1 MiB), or an error.
absl::StatusOr<std::string> HelpOf(const std::string& path) {
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError(std::strerror(errno));
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl(path.c_str(), path.c_str(), "--help", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0 && out.size() < (1 << 20)) out.append(buf, n);
  close(fds[0]);
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0 || out.empty()) {
    return absl::NotFoundError(absl::StrCat("cannot run ", path, " --help"));
  }
  return out;
}

// cowkvd beside this cowkv binary, or empty.
std::string BesideMe() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  std::string dir(self, n);
  dir.resize(dir.rfind('/') + 1);
  const std::string path = dir + "cowkvd";
  return access(path.c_str(), X_OK) == 0 ? path : "";
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// mkdir -p.
absl::Status MakeDir(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
    }
    if (slash == std::string::npos) return absl::OkStatus();
  }
}

// Every page as {file name under DIR, text}.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> AllPages(CLI::App* root,
                                                                          const ManArgs& a) {
  std::vector<std::pair<std::string, std::string>> pages;
  pages.emplace_back("man1/cowkv.1", RootPage(root));
  for (CLI::App* c : root->get_subcommands([](CLI::App*) { return true; })) {
    pages.emplace_back(absl::StrCat("man1/cowkv-", c->get_name(), ".1"), CommandPage(c));
  }
  const std::string cowkvd = a.cowkvd.empty() ? BesideMe() : a.cowkvd;
  if (cowkvd.empty()) return pages;
  absl::StatusOr<std::string> help = HelpOf(cowkvd);
  if (!help.ok()) return help.status();
  pages.emplace_back("man8/cowkvd.8", CowkvdPage(*help));
  return pages;
}

int RunWriteAll(CLI::App* root, const ManArgs& a, bool json) {
  constexpr char kOp[] = "man";
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> pages = AllPages(root, a);
  if (!pages.ok()) return Fail(kOp, pages.status().message());
  absl::Status s = MakeDir(a.dir);
  if (s.ok()) s = MakeDir(a.dir + "/man1");
  if (s.ok() && pages->back().first.rfind("man8/", 0) == 0) s = MakeDir(a.dir + "/man8");
  std::string text;
  Json written = Json::array();
  for (const auto& [name, page] : *pages) {
    const std::string path = absl::StrCat(a.dir, "/", name);
    if (s.ok()) s = WriteFile(path, page);
    absl::StrAppend(&text, path, "\n");
    written.push_back(path);
  }
  if (!s.ok()) return Fail(kOp, s.message());
  if (!json) return Emit(kOp, text);
  Json j = JsonObject();
  j["pages"] = written;
  return Emit(kOp, DumpJson(j));
}

int RunPrintOne(CLI::App* root, const ManArgs& a) {
  constexpr char kOp[] = "man";
  if (a.page == "cowkv") return Emit(kOp, RootPage(root));
  if (a.page == "cowkvd") {
    const std::string cowkvd = a.cowkvd.empty() ? BesideMe() : a.cowkvd;
    if (cowkvd.empty()) return Fail(kOp, "no cowkvd beside cowkv: give --cowkvd PATH", kExitUsage);
    absl::StatusOr<std::string> help = HelpOf(cowkvd);
    if (!help.ok()) return Fail(kOp, help.status().message());
    return Emit(kOp, CowkvdPage(*help));
  }
  for (CLI::App* c : root->get_subcommands([](CLI::App*) { return true; })) {
    if (c->get_name() == a.page) return Emit(kOp, CommandPage(c));
  }
  return Fail(kOp, absl::StrCat("no page '", a.page, "' (cowkv, cowkvd or a command)"), kExitUsage);
}

}  // namespace

RunFn AddMan(CLI::App* app) {
  CLI::App* cmd = app->add_subcommand(
      "man",
      "Print a manual page, or write them all (--dir): cowkv(1), cowkv-COMMAND(1), cowkvd(8)");
  auto a = std::make_shared<ManArgs>();
  cmd->add_option("--dir", a->dir, "Write every page under DIR/man1 and DIR/man8")
      ->type_name("DIR");
  cmd->add_option("--cowkvd", a->cowkvd,
                  "The cowkvd binary whose --help makes cowkvd(8) (default: beside cowkv)")
      ->type_name("PATH");
  cmd->add_option("PAGE", a->page, "cowkv (default), a command (kv, fs, ...) or cowkvd");
  CLI::App* root = app;
  return [root, a] {
    const CLI::Option* j = root->get_option("--json");
    return a->dir.empty() ? RunPrintOne(root, *a) : RunWriteAll(root, *a, j->count() > 0);
  };
}

}  // namespace cli
}  // namespace cowkv
