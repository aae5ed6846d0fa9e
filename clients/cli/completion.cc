// cowkv completion bash|zsh|fish: a shell completion script generated from
// the command tree itself (every group, command and long option CLI11
// knows), so it never falls behind the commands. zsh uses the bash script
// through bashcompinit.
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "clients/cli/commands.h"

namespace cowkv {
namespace cli {

namespace {

// For every command path ("" for the top, "kv", "fs get"...): the words
// that may follow it (its commands, then its long options).
struct Tree {
  std::map<std::string, std::vector<std::string>> words;
  std::map<std::string, std::vector<std::string>> commands;
};

void Walk(CLI::App* app, const std::string& path, Tree* t) {
  std::vector<std::string>& words = t->words[path];
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) {
    words.push_back(sub->get_name());
    t->commands[path].push_back(sub->get_name());
    Walk(sub, path.empty() ? sub->get_name() : absl::StrCat(path, " ", sub->get_name()), t);
  }
  for (const CLI::Option* o : app->get_options()) {
    for (const std::string& name : o->get_lnames()) words.push_back("--" + name);
  }
}

std::string Bash(const Tree& t) {
  std::string s =
      "# cowkv bash completion: source <(cowkv completion bash)\n"
      "_cowkv() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" path=\"\" w i opts=\"\"\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    w=\"${COMP_WORDS[i]}\"\n"
      "    case \"$path:$w\" in\n";
  for (const auto& [path, cmds] : t.commands) {
    for (const std::string& c : cmds) absl::StrAppend(&s, "      \"", path, ":", c, "\") ;&\n");
  }
  s +=
      "      __none__) path=\"${path:+$path }$w\" ;;\n"
      "    esac\n"
      "  done\n"
      "  case \"$path\" in\n";
  for (const auto& [path, words] : t.words) {
    absl::StrAppend(&s, "    \"", path, "\") opts=\"", absl::StrJoin(words, " "), "\" ;;\n");
  }
  s +=
      "  esac\n"
      "  COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
      "}\n"
      "complete -F _cowkv cowkv\n";
  return s;
}

std::string Fish(const Tree& t) {
  std::string s = "# cowkv fish completion: cowkv completion fish | source\n";
  absl::StrAppend(&s, "complete -c cowkv -f\n");
  for (const auto& [path, words] : t.words) {
    // The condition: every word of the path seen (fish cannot tell depth
    // apart further; command names do not repeat across levels).
    std::string cond = "__fish_use_subcommand";
    if (!path.empty()) {
      std::vector<std::string> parts = absl::StrSplit(path, ' ');
      std::vector<std::string> tests;
      for (const std::string& p : parts) tests.push_back("__fish_seen_subcommand_from " + p);
      cond = absl::StrJoin(tests, "; and ");
    }
    for (const std::string& w : words) {
      if (w.rfind("--", 0) == 0) {
        absl::StrAppend(&s, "complete -c cowkv -n '", cond, "' -l ", w.substr(2), "\n");
      } else {
        absl::StrAppend(&s, "complete -c cowkv -n '", cond, "' -a ", w, "\n");
      }
    }
  }
  return s;
}

}  // namespace

RunFn AddCompletion(CLI::App* app) {
  CLI::App* cmd = app->add_subcommand(
      "completion", "Print a shell completion script: bash, zsh (through bashcompinit) or fish");
  auto shell = std::make_shared<std::string>();
  cmd->add_option("SHELL", *shell, "bash, zsh or fish")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "fish"}));
  return [app, shell] {
    Tree t;
    Walk(app, "", &t);
    std::string out;
    if (*shell == "fish") {
      out = Fish(t);
    } else if (*shell == "zsh") {
      out = absl::StrCat(
          "# cowkv zsh completion: source <(cowkv completion zsh)\n"
          "autoload -U +X bashcompinit && bashcompinit\n",
          Bash(t));
    } else {
      out = Bash(t);
    }
    return Emit("completion", out);
  };
}

}  // namespace cli
}  // namespace cowkv
