// man(7) pages from the CLI11 tree (man_page.h).
#include "clients/cli/man_page.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "build_info/build_info.h"
#include "clients/cli/usage.h"

namespace cowkv {
namespace cli {

std::string RoffEscape(absl::string_view text) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::string l = absl::StrReplaceAll(line, {{"\\", "\\e"}});
    if (l[0] == '.' || l[0] == '\'') l.insert(0, "\\&");
    absl::StrAppend(&out, l, "\n");
  }
  return out;
}

namespace {

// An option or argument as a .TP entry: its names in bold, its value in
// italics, then the description.
struct Entry {
  std::vector<std::string> names;  // "-s", "--subvolume"; or "KEY"
  std::string value;               // "NAME"; empty for flags and arguments
  std::string description;
};

// A name or word for roff: every '-' a minus sign (\-), so it can be
// searched and copied.
std::string Word(absl::string_view w) {
  std::string e = RoffEscape(w);
  if (!e.empty()) e.pop_back();  // the newline
  return absl::StrReplaceAll(e, {{"-", "\\-"}});
}

std::string RenderEntry(const Entry& e) {
  std::vector<std::string> names;
  const bool argument = e.names.size() == 1 && e.names[0][0] != '-';
  for (const std::string& n : e.names) {
    names.push_back(absl::StrCat(argument ? "\\fI" : "\\fB", Word(n), "\\fR"));
  }
  std::string head = absl::StrJoin(names, ", ");
  if (!e.value.empty()) absl::StrAppend(&head, " \\fI", Word(e.value), "\\fR");
  return absl::StrCat(".TP\n", head, "\n", RoffEscape(e.description.empty() ? "-" : e.description));
}

Entry EntryOf(const CLI::Option* o) {
  Entry e;
  for (const std::string& s : o->get_snames()) e.names.push_back("-" + s);
  for (const std::string& l : o->get_lnames()) e.names.push_back("--" + l);
  if (e.names.empty()) e.names.push_back(o->get_name(true));
  const std::string usage = OptionUsage(o);
  const size_t space = usage.find(' ');
  if (o->nonpositional() && space != std::string::npos) e.value = usage.substr(space + 1);
  e.description = o->get_description();
  if (!e.description.empty() && e.description.back() != '.') e.description += ".";
  const std::string def = o->get_default_str();
  if (!def.empty() && !absl::StrContains(e.description, "default")) {
    absl::StrAppend(&e.description, " Default: ", def, ".");
  }
  if (o->get_required()) absl::StrAppend(&e.description, " Required.");
  if (!o->get_envname().empty())
    absl::StrAppend(&e.description, " Environment: $", o->get_envname(), ".");
  return e;
}

std::string Header(absl::string_view name, int section, absl::string_view summary) {
  std::string upper = absl::AsciiStrToUpper(name);
  std::string s = absl::StrCat(".TH ", upper, " ", section, " \"\" \"cowkv ", kCowkvVersion,
                               "\" \"cowkv manual\"\n.SH NAME\n", Word(name), " \\- ");
  absl::StrAppend(&s, RoffEscape(summary));
  return s;
}

// The first line of a description, without a "cowkv: " prefix or a final
// period: the NAME section's summary.
std::string Summary(absl::string_view description) {
  absl::string_view first = description.substr(0, description.find('\n'));
  absl::ConsumePrefix(&first, "cowkv: ");
  absl::ConsumePrefix(&first, "cowkvd: ");
  absl::ConsumeSuffix(&first, ".");
  return std::string(first);
}

std::string Synopsis(const CLI::App* cmd) {
  const std::string path = CommandPath(cmd);
  const std::string rest = UsageLine(cmd, std::string::npos).substr(path.size());
  return absl::StrCat(".PP\n\\fB", Word(path), "\\fR ", Word(rest), "\n");
}

std::vector<const CLI::App*> Leaves(const CLI::App* cmd) {
  std::vector<const CLI::App*> subs = cmd->get_subcommands([](const CLI::App*) { return true; });
  if (subs.empty()) return {cmd};
  std::vector<const CLI::App*> out;
  for (const CLI::App* s : subs) {
    for (const CLI::App* l : Leaves(s)) out.push_back(l);
  }
  return out;
}

std::string Options(const CLI::App* cmd) {
  std::string s;
  for (const CLI::Option* o : VisibleOptions(cmd)) absl::StrAppend(&s, RenderEntry(EntryOf(o)));
  return s;
}

constexpr char kExitStatus[] =
    "0 success; 1 failure (also: check found problems); 2 usage error; 3 invalid argument; "
    "4 not found; 5 already exists; 6 failed precondition (read-only snapshot, device in use); "
    "7 conflict, retry the transaction; 8 no space or a server limit; 9 data loss; "
    "10 cowkvd unavailable, retry; 11 timed out or cancelled; 12 not authenticated.";

std::string SeeAlso(const CLI::App* root, absl::string_view self) {
  std::vector<std::string> refs;
  if (self != "cowkv") refs.push_back("\\fBcowkv\\fR(1)");
  for (const CLI::App* c : root->get_subcommands([](const CLI::App*) { return true; })) {
    const std::string name = absl::StrCat("cowkv-", c->get_name());
    if (name != self) refs.push_back(absl::StrCat("\\fB", Word(name), "\\fR(1)"));
  }
  if (self != "cowkvd") refs.push_back("\\fBcowkvd\\fR(8)");
  return absl::StrCat(".SH SEE ALSO\n", absl::StrJoin(refs, ",\n"), "\n");
}

const CLI::App* RootOf(const CLI::App* cmd) {
  while (cmd->get_parent() != nullptr) cmd = cmd->get_parent();
  return cmd;
}

}  // namespace

std::string RootPage(const CLI::App* root) {
  std::string s = Header("cowkv", 1, Summary(root->get_description()));
  absl::StrAppend(&s, ".SH SYNOPSIS\n", Synopsis(root), ".SH DESCRIPTION\n",
                  RoffEscape(root->get_description()),
                  ".PP\nGlobal options may come before or after the command. Every failure "
                  "prints one line, \\fIcowkv: operation: reason\\fR, on stderr.\n");
  absl::StrAppend(&s, ".SH GLOBAL OPTIONS\n", Options(root), ".SH COMMANDS\n");
  for (const CLI::App* c : root->get_subcommands([](const CLI::App*) { return true; })) {
    Entry e{{c->get_name()},
            "",
            absl::StrCat(c->get_description(), "; see cowkv-", c->get_name(), "(1).")};
    absl::StrAppend(&s, ".TP\n\\fB", Word(c->get_name()), "\\fR\n", RoffEscape(e.description));
  }
  absl::StrAppend(&s, ".SH ENVIRONMENT\n");
  for (const CLI::Option* o : VisibleOptions(root)) {
    if (o->get_envname().empty()) continue;
    absl::StrAppend(
        &s,
        RenderEntry({{o->get_envname()}, "", absl::StrCat("As --", o->get_lnames().front(), ".")}));
  }
  absl::StrAppend(&s, ".SH EXIT STATUS\n", RoffEscape(kExitStatus), SeeAlso(root, "cowkv"));
  return s;
}

std::string CommandPage(const CLI::App* cmd) {
  const std::string name = absl::StrCat("cowkv-", cmd->get_name());
  std::string s = Header(name, 1, Summary(cmd->get_description()));
  const std::vector<const CLI::App*> leaves = Leaves(cmd);
  absl::StrAppend(&s, ".SH SYNOPSIS\n");
  for (const CLI::App* l : leaves) absl::StrAppend(&s, Synopsis(l));
  absl::StrAppend(&s, ".SH DESCRIPTION\n", RoffEscape(cmd->get_description()));
  if (leaves.size() == 1 && leaves[0] == cmd) {
    absl::StrAppend(&s, ".SH OPTIONS\n", Options(cmd));
  } else {
    absl::StrAppend(&s, ".SH COMMANDS\n");
    for (const CLI::App* l : leaves) {
      absl::StrAppend(&s, ".SS \"", Word(CommandPath(l)), "\"\n", RoffEscape(l->get_description()),
                      Options(l));
    }
  }
  absl::StrAppend(
      &s,
      ".SH GLOBAL OPTIONS\nThe global options of \\fBcowkv\\fR(1) (\\fB\\-\\-server\\fR, "
      "\\fB\\-\\-json\\fR, ...) may come before or after the command.\n");
  absl::StrAppend(&s, ".SH EXIT STATUS\n", RoffEscape(kExitStatus), SeeAlso(RootOf(cmd), name));
  return s;
}

namespace {

// One option entry of CLI11's help: "  --device TEXT REQUIRED      Device ...".
Entry ParseHelpEntry(absl::string_view line) {
  line = absl::StripLeadingAsciiWhitespace(line);
  const size_t gap = line.find("  ");
  absl::string_view head = line.substr(0, gap);
  Entry e;
  e.description = gap == absl::string_view::npos
                      ? ""
                      : std::string(absl::StripAsciiWhitespace(line.substr(gap)));
  std::vector<absl::string_view> words = absl::StrSplit(head, ' ', absl::SkipEmpty());
  for (absl::string_view n : absl::StrSplit(words[0], ',')) e.names.emplace_back(n);
  bool required = false;
  for (size_t i = 1; i < words.size(); ++i) {
    if (words[i] == "REQUIRED") {
      required = true;
    } else {
      std::string t(words[i].substr(0, words[i].find('=')));
      const bool generic = t == "TEXT" || t == "INT" || t == "UINT" || t == "FLOAT";
      e.value = generic ? absl::StrReplaceAll(
                              absl::AsciiStrToUpper(absl::StripPrefix(e.names.back(), "--")),
                              {{"-", "_"}})
                        : t;
    }
  }
  if (!e.description.empty() && e.description.back() != '.') e.description += ".";
  if (required) e.description += " Required.";
  return e;
}

}  // namespace

std::string CowkvdPage(absl::string_view help) {
  std::vector<absl::string_view> lines = absl::StrSplit(help, '\n');
  std::vector<Entry> entries;
  bool options = false;
  for (absl::string_view line : lines) {
    if (absl::StartsWith(line, "Options:")) {
      options = true;
    } else if (options && absl::StartsWith(line, "  -")) {
      entries.push_back(ParseHelpEntry(line));
    } else if (options && !entries.empty() && absl::StartsWith(line, "   ")) {
      absl::StrAppend(&entries.back().description, entries.back().description.empty() ? "" : " ",
                      absl::StripAsciiWhitespace(line));
    }
  }
  std::string s = Header("cowkvd", 8, Summary(lines.empty() ? "" : lines[0]));
  absl::StrAppend(
      &s, ".SH SYNOPSIS\n.PP\n\\fBcowkvd\\fR \\fB\\-\\-device\\fR \\fIPATH\\fR [\\fIoptions\\fR]\n",
      ".SH DESCRIPTION\n",
      RoffEscape("cowkvd serves a cowkv device over gRPC (the cowkv.v1 services, "
                 "grpc.health.v1, reflection) and Prometheus metrics over HTTP. "
                 "SIGINT or SIGTERM drains in-flight calls, commits and exits 0."),
      ".SH OPTIONS\n");
  for (const Entry& e : entries) {
    if (e.names.front() == "-h") continue;
    absl::StrAppend(&s, RenderEntry(e));
  }
  absl::StrAppend(&s, ".SH EXIT STATUS\n",
                  RoffEscape("0 clean stop; 1 the server could not start or its final commit "
                             "failed; 2 usage error."),
                  ".SH SEE ALSO\n\\fBcowkv\\fR(1)\n");
  return s;
}

}  // namespace cli
}  // namespace cowkv
