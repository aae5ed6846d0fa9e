// Usage lines and parse-error sentences from the CLI11 tree (usage.h).
#include "clients/cli/usage.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace cowkv {
namespace cli {

namespace {

// A flag takes no value (CLI11 expects no items after it).
bool IsFlag(const CLI::Option* opt) { return opt->get_items_expected_max() == 0; }

// The value's placeholder: a set "a|b|c", the type name the command gave
// (SIZE, FILE, ...), or the long name in capitals for CLI11's generic ones.
std::string ValueName(const CLI::Option* opt) {
  const std::string full = opt->get_type_name();
  const size_t set = full.find(":{");
  if (set != std::string::npos && full.back() == '}') {
    return absl::StrJoin(absl::StrSplit(full.substr(set + 2, full.size() - set - 3), ','), "|");
  }
  // Validators append ":DESCRIPTION"; the type name is what comes first
  // (OFF:LEN, the one name with a colon of its own, stays whole).
  std::string base = absl::StartsWith(full, "OFF:LEN") ? "OFF:LEN" : full.substr(0, full.find(':'));
  static const char* const kGeneric[] = {"TEXT", "INT", "UINT", "FLOAT", "NUMBER", "BOOLEAN"};
  const bool generic =
      std::find(std::begin(kGeneric), std::end(kGeneric), base) != std::end(kGeneric);
  if ((generic || base.empty()) && !opt->get_lnames().empty()) {
    base = absl::AsciiStrToUpper(opt->get_lnames().front());
    std::replace(base.begin(), base.end(), '-', '_');
  }
  return base;
}

std::string DisplayName(const CLI::Option* opt) {
  if (!opt->get_snames().empty()) return "-" + opt->get_snames().front();
  if (!opt->get_lnames().empty()) return "--" + opt->get_lnames().front();
  return opt->get_name(true);
}

bool Many(const CLI::Option* opt) { return opt->get_items_expected_max() > 1; }

}  // namespace

std::string CommandPath(const CLI::App* cmd) {
  std::vector<std::string> names;
  for (const CLI::App* a = cmd; a != nullptr; a = a->get_parent()) names.push_back(a->get_name());
  std::reverse(names.begin(), names.end());
  return absl::StrJoin(names, " ");
}

std::string OptionUsage(const CLI::Option* opt) {
  if (!opt->nonpositional()) return opt->get_name(true) + (Many(opt) ? "..." : "");
  if (IsFlag(opt)) return DisplayName(opt);
  return absl::StrCat(DisplayName(opt), " ", ValueName(opt), Many(opt) ? "..." : "");
}

std::vector<const CLI::Option*> VisibleOptions(const CLI::App* cmd) {
  const CLI::Option* help = cmd->get_help_ptr();
  std::vector<const CLI::Option*> named, positional;
  for (const CLI::Option* o : cmd->get_options()) {
    if (o == help || o->get_group().empty()) continue;
    (o->nonpositional() ? named : positional).push_back(o);
  }
  named.insert(named.end(), positional.begin(), positional.end());
  return named;
}

std::string UsageLine(const CLI::App* cmd, size_t width) {
  std::vector<std::string> optional, rest;
  for (const CLI::Option* o : VisibleOptions(cmd)) {
    const std::string u = OptionUsage(o);
    if (!o->nonpositional()) {
      rest.push_back(o->get_required() ? u : "[" + u + "]");
    } else if (o->get_required()) {
      rest.insert(rest.begin(), u);
    } else {
      optional.push_back("[" + u + "]");
    }
  }
  const bool group = !cmd->get_subcommands([](const CLI::App*) { return true; }).empty();
  if (group) rest.push_back("COMMAND ...");
  std::vector<std::string> words = {CommandPath(cmd)};
  words.insert(words.end(), optional.begin(), optional.end());
  words.insert(words.end(), rest.begin(), rest.end());
  std::string line = absl::StrJoin(words, " ");
  if (line.size() <= width || optional.empty()) return line;
  words = {CommandPath(cmd), "[options]"};
  words.insert(words.end(), rest.begin(), rest.end());
  return absl::StrJoin(words, " ");
}

namespace {

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string Closest(absl::string_view word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = 3;
  std::vector<std::string> prefixed;
  for (const std::string& n : names) {
    const size_t d = EditDistance(word, n);
    if (d < best_d) best_d = d, best = n;
    if (word.size() > 2 && absl::StartsWith(n, word)) prefixed.push_back(n);
  }
  if (best.empty() && prefixed.size() == 1) return prefixed.front();
  return best;
}

namespace {

// Every option `cmd` and the apps above it accept (global options fall
// through to the root).
std::vector<const CLI::Option*> Reachable(const CLI::App* cmd) {
  std::vector<const CLI::Option*> out;
  for (const CLI::App* a = cmd; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* o : a->get_options()) out.push_back(o);
  }
  return out;
}

// The option named by the argument `arg` ("--limit", "--limit=5", "-s").
const CLI::Option* Named(const CLI::App* cmd, absl::string_view arg) {
  if (arg.size() < 2 || arg[0] != '-') return nullptr;
  const bool is_long = arg[1] == '-';
  const absl::string_view name = arg.substr(is_long ? 2 : 1, is_long ? arg.find('=') - 2 : 1);
  for (const CLI::Option* o : Reachable(cmd)) {
    const std::vector<std::string>& names = is_long ? o->get_lnames() : o->get_snames();
    if (std::find(names.begin(), names.end(), name) != names.end()) return o;
  }
  return nullptr;
}

// The option given last on the command line with nothing after it, or
// followed by another option: the one whose value is missing.
std::string MissingValue(const CLI::App* cmd, int argc, const char* const* argv) {
  for (int i = argc - 1; i >= 1; --i) {
    const absl::string_view a = argv[i];
    const CLI::Option* o = Named(cmd, a);
    if (o == nullptr || IsFlag(o) || absl::StrContains(a, '=')) continue;
    const bool last = i + 1 == argc;
    if (last || Named(cmd, argv[i + 1]) != nullptr) {
      return absl::StrCat(a, " needs a value (", ValueName(o), ")");
    }
  }
  return "";
}

std::vector<std::string> LongNames(const CLI::App* cmd) {
  std::vector<std::string> names;
  for (const CLI::Option* o : Reachable(cmd)) {
    if (o->get_group().empty()) continue;
    for (const std::string& n : o->get_lnames()) names.push_back("--" + n);
  }
  return names;
}

// Unknown options and arguments left over (CLI11's ExtrasError).
std::string Extras(const CLI::App* root, const CLI::App* cmd) {
  const std::vector<std::string> extras = root->remaining(true);
  if (extras.empty()) return "";
  const std::string& first = extras.front();
  if (first.size() > 1 && first[0] == '-') {
    std::string why = absl::StrCat("unknown option '", first, "'");
    const std::string near = Closest(first.substr(0, first.find('=')), LongNames(cmd));
    if (!near.empty()) return absl::StrCat(why, "; did you mean '", near, "'?");
    bool takes_args = false;
    for (const CLI::Option* o : VisibleOptions(cmd)) takes_args |= !o->nonpositional();
    if (takes_args && first[1] != '-') {
      absl::StrAppend(&why, " (an argument starting with '-' goes after '--')");
    }
    return why;
  }
  bool any_positional = false;
  for (const CLI::Option* o : VisibleOptions(cmd)) any_positional |= !o->nonpositional();
  return absl::StrCat(extras.size() == 1 ? "unexpected argument '" : "unexpected arguments '",
                      absl::StrJoin(extras, " "), "'",
                      any_positional ? "" : " (it takes no arguments)");
}

// The required argument or option that was not given.
std::string Missing(const CLI::App* cmd) {
  std::vector<std::string> missing;
  for (const CLI::Option* o : VisibleOptions(cmd)) {
    if (o->get_required() && o->count() == 0) missing.push_back(o->get_name(true));
  }
  if (missing.empty()) return "";
  return absl::StrCat("missing ", absl::StrJoin(missing, " and "));
}

std::string TypeWords(const CLI::Option* o) {
  const std::string t = o->get_type_name().substr(0, o->get_type_name().find(':'));
  if (t == "UINT") return "a whole number of 0 or more";
  if (t == "INT") return "a whole number";
  if (t == "FLOAT" || t == "NUMBER") return "a number";
  return ValueName(o);
}

// A value CLI11 could not convert (ConversionError): the option, the
// value and what it takes. The option is the one given with a value that
// does not convert to its type.
std::string Unconvertible(const CLI::App* cmd, const CLI::ParseError& e) {
  for (const CLI::Option* o : Reachable(cmd)) {
    if (o->count() == 0 || IsFlag(o) || o->results().empty()) continue;
    std::vector<std::string> names;
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    for (const std::string& n : o->get_snames()) names.push_back("-" + n);
    if (!o->nonpositional()) names.push_back(o->get_name(true));
    for (const std::string& n : names) {
      if (n.size() < 2 || !absl::StrContains(e.what(), n)) continue;
      return absl::StrCat(names.front(), " takes ", TypeWords(o), ", not '", o->results().back(),
                          "'");
    }
  }
  return "";
}

// A value a validator refused (ValidationError). CLI11's numeric
// validators word it poorly ("Value soon not in range 0.000000 to 1.79e308"):
// those become what the option takes, read from the validator's
// description in the option's type name. Others name their rule well
// ("--nodesize: 3000 is not a power of two ...") and are kept.
std::string Refused(const CLI::App* cmd, const CLI::ParseError& e) {
  for (const CLI::Option* o : Reachable(cmd)) {
    if (o->count() == 0 || IsFlag(o) || o->results().empty() || o->get_lnames().empty()) continue;
    const std::string name = "--" + o->get_lnames().front();
    if (!absl::StartsWith(e.what(), name + ":")) continue;
    const std::string type = o->get_type_name();
    std::string takes;
    if (absl::StrContains(type, ":NONNEGATIVE")) takes = "a number of 0 or more";
    if (absl::StrContains(type, ":POSITIVE")) takes = "a number above 0";
    const size_t range = type.find(" in [");
    if (range != std::string::npos) takes = absl::StrCat("a number in ", type.substr(range + 4));
    if (takes.empty()) break;
    return absl::StrCat(name, " takes ", takes, ", not '", o->results().back(), "'");
  }
  return e.what();  // names the option and the rule ("--nodesize: ...")
}

}  // namespace

std::string ParseErrorMessage(const CLI::ParseError& e, CLI::App* root, CLI::App* cmd, int argc,
                              const char* const* argv) {
  std::string why;
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    why = MissingValue(cmd, argc, argv);
  } else if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    why = Extras(root, cmd);
  } else if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    why = Missing(cmd);
  } else if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr) {
    why = Unconvertible(cmd, e);
  } else if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr) {
    why = Refused(cmd, e);
  } else if (dynamic_cast<const CLI::RequiresError*>(&e) != nullptr ||
             dynamic_cast<const CLI::ExcludesError*>(&e) != nullptr) {
    why = e.what();  // "--create requires --name"
  }
  if (why.empty()) return "";
  return absl::StrCat(why, " (usage: ", UsageLine(cmd), ")");
}

}  // namespace cli
}  // namespace cowkv
