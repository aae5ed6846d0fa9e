// The command line: the app, global options, parse-error mapping, dispatch.
//
//   cowkv [--server ADDR] [--token-file FILE] [--timeout SECONDS] [--json]
//         [--tls-ca FILE] [--tls-cert FILE --tls-key FILE]
//         <command> [options] <args>
//
// CLI11 reports its own outcomes as exceptions with exit codes of its own
// (105 validation, 106 required, 109 extras, ...): every one of those is a
// usage error here (exit 2, one stderr line); --help and --version exit 0.
#include "build_info/build_info.h"
#include "clients/cli/app.h"

#include <cstdio>
#include <iostream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "clients/cli/usage.h"

namespace cowkv {
namespace cli {

std::string OneLine(absl::string_view text) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (!out.empty()) out += out.back() == ':' ? " " : "; ";
    absl::StrAppend(&out, line);
  }
  return out;
}

int Fail(absl::string_view operation, absl::string_view reason,
         int exit_code) {
  std::cout.flush();
  std::fflush(stdout);
  std::cerr << "cowkv: " << operation << ": " << OneLine(reason) << std::endl;
  return exit_code;
}

int Emit(absl::string_view op, absl::string_view text) {
  if (!text.empty() &&
      std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) {
    return Fail(op, "error writing to stdout");
  }
  if (std::fflush(stdout) != 0) return Fail(op, "error writing to stdout");
  return kExitOk;
}

CommandGroup::CommandGroup(CLI::App* parent, const std::string& name,
                           const std::string& description)
    : app_(parent->add_subcommand(name, description)),
      runs_(std::make_shared<std::map<std::string, RunFn>>()) {
  app_->require_subcommand(1);
}

CLI::App* CommandGroup::Add(const std::string& name,
                            const std::string& description, RunFn run) {
  (*runs_)[name] = std::move(run);
  return app_->add_subcommand(name, description);
}

RunFn CommandGroup::Runner() const {
  return [app = app_, runs = runs_] {
    return (*runs)[app->get_subcommands().front()->get_name()]();
  };
}

namespace {

bool TakesValue(absl::string_view a) {
  return a == "--server" || a == "--token-file" || a == "--timeout" || a == "--tls-ca" ||
         a == "--tls-cert" || a == "--tls-key";
}

bool IsGlobalOption(absl::string_view a) {
  const absl::string_view name = a.substr(0, a.find('='));
  return TakesValue(name) || a == "--json" || a == "--quiet" || a == "-q";
}

}  // namespace

const char* FirstCommandWord(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view a = argv[i];
    if (TakesValue(a)) {
      ++i;
      continue;
    }
    if (a.empty() || a[0] != '-') return argv[i];
  }
  return nullptr;
}

namespace {

void AddGlobals(CLI::App* app, Globals* g) {
  app->add_option("--server", g->server, "cowkvd address HOST:PORT")
      ->envname("COWKV_SERVER")
      ->type_name("ADDR")
      ->capture_default_str();
  app->add_option("--token-file", g->token_file,
                  "File holding the bearer token (cowkvd --auth-token-file)")
      ->type_name("FILE");
  app->add_option("--timeout", g->timeout_seconds,
                  "Deadline of each call in seconds (0 = none; file "
                  "transfers and check have none unless given)")
      ->type_name("SECONDS")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app->add_flag("--json", g->json, "Print JSON for scripts instead of text");
  app->add_flag("-q,--quiet", g->quiet, "Draw no progress lines on a terminal");
  app->add_option("--tls-ca", g->tls_ca, "Talk TLS; trust the CA in this PEM file")
      ->envname("COWKV_TLS_CA")
      ->type_name("FILE");
  app->add_option("--tls-cert", g->tls_cert,
                  "Talk TLS with this client certificate (PEM; with --tls-key)")
      ->envname("COWKV_TLS_CERT")
      ->type_name("FILE");
  app->add_option("--tls-key", g->tls_key, "The client certificate's key (PEM)")
      ->envname("COWKV_TLS_KEY")
      ->type_name("FILE");
}

}  // namespace

Cli::Cli()
    : app_("cowkv: a copy-on-write B+tree key-value store with btrfs "
           "semantics.\nOffline commands (mkfs, check PATH, dump-tree) work "
           "on an unmounted device or image file;\nthe others talk to "
           "cowkvd (--server).",
           "cowkv"),
      globals_(std::make_shared<Globals>()) {
  app_.set_version_flag("--version",
                        absl::StrCat("cowkv ", kCowkvVersion, " (", kApiVersion, ", commit ",
                                     GitCommit(), ", ", BuildType(), ")"),
                        "Print the version and exit");
  app_.require_subcommand(1);
  app_.fallthrough();  // global options may follow the command
  AddGlobals(&app_, globals_.get());
  const GlobalsPtr g = globals_;
  const std::vector<std::pair<std::string, RunFn>> commands = {
      {"mkfs", AddMkfs(&app_)},          {"check", AddCheck(&app_, g)},
      {"dump-tree", AddDumpTree(&app_)}, {"subvolume", AddSubvolume(&app_, g)},
      {"kv", AddKv(&app_, g)},           {"fs", AddFs(&app_, g)},
      {"stats", AddStats(&app_, g)},     {"sync", AddSync(&app_, g)},
      {"version", AddVersion(&app_, g)}, {"status", AddStatus(&app_, g)},
      {"bench", AddBench(&app_, g)},     {"mount", AddMount(&app_)},
      {"lease", AddLease(&app_, g)},     {"lock", AddLock(&app_, g)},
      {"send", AddSend(&app_, g)},       {"receive", AddReceive(&app_, g)},
      {"backup", AddBackup(&app_, g)},   {"export", AddExport(&app_, g)},
      {"import", AddImport(&app_, g)},   {"completion", AddCompletion(&app_)}};
  for (const auto& [name, run] : commands) commands_[name] = run;
  commands_["man"] = AddMan(&app_);  // man.cc
}

std::string Cli::chosen() const {
  std::vector<std::string> words;
  const CLI::App* cur = &app_;
  for (;;) {
    std::vector<CLI::App*> subs = cur->get_subcommands();
    if (subs.empty()) break;
    cur = subs.front();
    words.push_back(cur->get_name());
  }
  return absl::StrJoin(words, " ");
}

int Cli::UsageError(const CLI::ParseError& e, const char* word, int argc,
                    const char* const* argv) {
  if (word == nullptr) {
    // CLI11 reports the missing command before an unknown global option.
    for (int i = 1; i < argc; ++i) {
      const absl::string_view a = argv[i];
      if (TakesValue(a) && i + 1 == argc) {
        return Fail("usage", absl::StrCat(a, " needs a value"), kExitUsage);
      } else if (TakesValue(a)) {
        ++i;
      } else if (a.substr(0, 1) == "-" && !IsGlobalOption(a)) {
        return Fail("usage", absl::StrCat("unknown option '", argv[i], "'"),
                    kExitUsage);
      }
    }
    return Fail("usage", "no command given (see 'cowkv --help')", kExitUsage);
  }
  const std::string op = chosen();
  const bool missing_or_extra = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr ||
                                dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr;
  const std::string group = missing_or_extra ? GroupError(argc, argv) : "";
  if (!group.empty()) return Fail(op, group, kExitUsage);
  CLI::App* cmd = &app_;
  while (!cmd->get_subcommands().empty()) cmd = cmd->get_subcommands().front();
  const std::string why = ParseErrorMessage(e, &app_, cmd, argc, argv);
  return Fail(op.empty() ? "usage" : op, why.empty() ? e.what() : why, kExitUsage);
}

// A command group (`kv`, `subvolume`, `fs snapshot`...) given no command or
// an unknown one: which, and the group's commands. Empty for other errors.
std::string Cli::GroupError(int argc, const char* const* argv) {
  std::vector<CLI::App*> path = {&app_};
  for (;;) {
    std::vector<CLI::App*> subs = path.back()->get_subcommands();
    if (subs.empty()) break;
    path.push_back(subs.front());
  }
  CLI::App* group = path.back();
  std::vector<std::string> names;
  for (const CLI::App* c : group->get_subcommands([](CLI::App*) { return true; })) {
    names.push_back(c->get_name());
  }
  if (path.size() < 2 || names.empty()) return "";
  // The first word after the group's own name that is not an option, and
  // the first option that is not a global one.
  std::string word, option;
  for (int i = 1, depth = 1; i < argc && word.empty(); ++i) {
    const absl::string_view a = argv[i];
    if (depth < static_cast<int>(path.size()) && a == path[depth]->get_name()) {
      ++depth;
    } else if (depth == static_cast<int>(path.size())) {
      if (a.substr(0, 1) != "-") {
        word = std::string(a);
      } else if (!IsGlobalOption(a) && option.empty()) {
        option = std::string(a);
      } else if (TakesValue(a)) {
        ++i;
      }
    }
  }
  const std::string cmd = chosen();
  const std::string list = absl::StrCat("(", cmd, " commands: ", absl::StrJoin(names, ", "),
                                        "; see 'cowkv ", cmd, " --help')");
  if (word.empty() && !option.empty()) return absl::StrCat("unknown option '", option, "' ", list);
  if (word.empty()) return absl::StrCat("a command is required ", list);
  return absl::StrCat("unknown command '", word, "' ", list);
}

int Cli::Parse(int argc, const char* const* argv) {
  const char* word = FirstCommandWord(argc, argv);
  if (word != nullptr && commands_.count(word) == 0) {
    std::vector<std::string> names;
    for (const auto& c : commands_) names.push_back(c.first);
    return Fail("usage",
                absl::StrCat("unknown command '", word, "' (commands: ",
                             absl::StrJoin(names, ", "),
                             "; see 'cowkv --help')"),
                kExitUsage);
  }
  try {
    app_.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      return app_.exit(e);  // --help, --version: print to stdout, exit 0
    }
    return UsageError(e, word, argc, argv);
  }
  globals_->timeout_given = app_.get_option("--timeout")->count() > 0;
  return -1;
}

int Cli::Run() {
  const std::string name = app_.get_subcommands().front()->get_name();
  try {
    return commands_[name]();
  } catch (const std::exception& e) {
    return Fail(chosen(), e.what());
  }
}

}  // namespace cli
}  // namespace cowkv
