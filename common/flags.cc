// Copyright 2026 The Ember Authors.

#include "common/flags.h"

#include <cstdlib>
#include <iostream>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/build_info.h"
#include "common/log.h"
#include "common/malloc_tuning.h"

namespace ember {
namespace {

constexpr size_t kFlagColumn = 2;    // "  --name=VALUE"
constexpr size_t kHelpColumn = 29;   // where the help text starts
constexpr size_t kWidth = 92;        // help lines wrap before this column
constexpr char kNoBreak[] = "\x01";  // a space AppendWrapped does not break at

// "a, b or c".
std::string Alternatives(const std::vector<std::string>& words) {
  if (words.size() <= 1) return absl::StrJoin(words, "");
  return absl::StrCat(absl::StrJoin(words.begin(), words.end() - 1, ", "), " or ", words.back());
}

// Appends `text` word-wrapped into the help column; the first line continues `*out`'s
// last line, which must end at the help column.
void AppendWrapped(std::string* out, absl::string_view text) {
  size_t column = kHelpColumn;
  bool first = true;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!first && column + 1 + word.size() > kWidth) {
      absl::StrAppend(out, "\n", std::string(kHelpColumn, ' '));
      column = kHelpColumn;
      first = true;
    }
    if (!first) {
      out->push_back(' ');
      ++column;
    }
    absl::StrAppend(out, absl::StrReplaceAll(word, {{kNoBreak, " "}}));
    column += word.size();
    first = false;
  }
  out->push_back('\n');
}

// "help. Range: R. Default: D." with the sentences the entry has.
std::string HelpText(const flags_internal::Entry& e) {
  std::string text = e.help;
  auto sentence = [&text](absl::string_view s) {
    if (!text.empty() && text.back() != '.') text.push_back('.');
    if (!text.empty()) text.push_back(' ');
    absl::StrAppend(&text, s);
  };
  // A range does not break across lines: its spaces are kNoBreak until printed.
  if (!e.range_text.empty()) {
    sentence(absl::StrCat("Range: ", absl::StrReplaceAll(e.range_text, {{" ", kNoBreak}}), "."));
  }
  std::string from_env;
  for (const std::string& var : e.env) absl::StrAppend(&from_env, "$", var, ", else ");
  if (e.required) {
    sentence(
        e.env.empty()
            ? "Required."
            : absl::StrCat("Required; default: ", from_env.substr(0, from_env.size() - 7), "."));
  } else if (!e.default_text.empty() || !from_env.empty()) {
    std::string shown = e.default_text.empty() ? "none" : e.default_text;
    sentence(absl::StrCat("Default: ", from_env, shown, shown.back() == '.' ? "" : "."));
  }
  return text;
}

}  // namespace

absl::StatusOr<CommandLine> SplitCommandLine(int argc, char** argv, bool accept_positionals) {
  CommandLine line;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      line.help = true;
    } else if (arg == "--version") {
      line.version = true;
    } else if (arg.size() > 2 && arg.substr(0, 2) == "--") {
      arg.remove_prefix(2);
      const size_t eq = arg.find('=');
      Flag flag;
      flag.name = arg.substr(0, eq);
      flag.has_value = eq != absl::string_view::npos;
      if (flag.has_value) flag.value = arg.substr(eq + 1);
      line.flags.push_back(flag);
    } else if (accept_positionals && !(arg.size() > 1 && arg[0] == '-')) {
      line.positionals.push_back(arg);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
  }
  return line;
}

absl::Status RequireValue(const Flag& flag) {
  if (flag.has_value) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag.name, " needs =value"));
}

absl::Status ParseBool(const Flag& flag, bool* out) {
  if (!flag.has_value || flag.value == "true" || flag.value == "1") {
    *out = true;
  } else if (flag.value == "false" || flag.value == "0") {
    *out = false;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--", flag.name, ": expected true or false"));
  }
  return absl::OkStatus();
}

absl::Status ParseString(const Flag& flag, std::string* out) {
  if (absl::Status s = RequireValue(flag); !s.ok()) return s;
  *out = std::string(flag.value);
  return absl::OkStatus();
}

// ---- FlagSet::Decl ----

FlagSet::Decl& FlagSet::Decl::Required() {
  entry_->required = true;
  return *this;
}

FlagSet::Decl& FlagSet::Decl::Env(std::initializer_list<absl::string_view> variables) {
  for (absl::string_view v : variables) entry_->env.emplace_back(v);
  return *this;
}

FlagSet::Decl& FlagSet::Decl::DefaultText(absl::string_view text) {
  entry_->default_text = std::string(text);
  return *this;
}

FlagSet::Decl& FlagSet::Decl::NonEmpty() {
  entry_->non_empty = true;
  return *this;
}

FlagSet::Decl& FlagSet::Decl::Check(std::function<absl::Status(const Flag&)> check) {
  entry_->check = std::move(check);
  return *this;
}

// ---- FlagSet ----

FlagSet::FlagSet(std::string program) : program_(std::move(program)) {}
FlagSet::~FlagSet() = default;

void FlagSet::Section(absl::string_view heading) {
  items_.emplace_back(nullptr, std::string(heading));
}

void FlagSet::SetRangeText(flags_internal::Entry* entry, std::string text) {
  entry->range_text = std::move(text);
}

flags_internal::Entry* FlagSet::Add(absl::string_view name, absl::string_view value_name,
                                    absl::string_view help, std::string default_text,
                                    std::function<absl::Status(const Flag&)> parse) {
  flags_internal::Entry& e = entries_.emplace_back();
  e.name = std::string(name);
  e.value_name = std::string(value_name);
  e.help = std::string(help);
  e.default_text = std::move(default_text);
  e.parse = std::move(parse);
  items_.emplace_back(&e, "");
  return &e;
}

FlagSet::NumberDecl<int64_t> FlagSet::Millis(absl::string_view name, absl::Duration* field,
                                             absl::string_view help) {
  return AddNumber<int64_t>(name, "N", help, FormatNumber(absl::ToInt64Milliseconds(*field)),
                            [field](int64_t ms) { *field = absl::Milliseconds(ms); });
}

FlagSet::NumberDecl<double> FlagSet::Seconds(absl::string_view name, absl::Duration* field,
                                             absl::string_view help) {
  return AddNumber<double>(name, "S", help, FormatNumber(absl::ToDoubleSeconds(*field)),
                           [field](double s) { *field = absl::Seconds(s); });
}

FlagSet::Decl FlagSet::String(absl::string_view name, std::string* field,
                              absl::string_view value_name, absl::string_view help) {
  return Decl(Add(name, value_name, help, *field,
                  [field](const Flag& flag) { return ParseString(flag, field); }));
}

FlagSet::Decl FlagSet::String(absl::string_view name, std::optional<std::string>* field,
                              absl::string_view value_name, absl::string_view help) {
  return Decl(Add(name, value_name, help, field->value_or(""), [field](const Flag& flag) {
    field->emplace();
    return ParseString(flag, &**field);
  }));
}

FlagSet::Decl FlagSet::Bool(absl::string_view name, bool* field, absl::string_view help) {
  // A switch that is off by default reads `--name`; one that is on, `--name=true|false`.
  return Decl(Add(name, *field ? "true|false" : "", help, *field ? "true" : "",
                  [field](const Flag& flag) { return ParseBool(flag, field); }));
}

FlagSet::Decl FlagSet::AddChoice(absl::string_view name, absl::string_view help,
                                 std::string default_text, std::vector<std::string> words,
                                 std::function<void(size_t)> store) {
  const std::string value_name = absl::StrJoin(words, "|");
  return Decl(Add(name, value_name, help, std::move(default_text),
                  [words, store = std::move(store)](const Flag& flag) -> absl::Status {
                    if (absl::Status s = RequireValue(flag); !s.ok()) return s;
                    for (size_t i = 0; i < words.size(); ++i) {
                      if (flag.value == words[i]) {
                        store(i);
                        return absl::OkStatus();
                      }
                    }
                    return absl::InvalidArgumentError(absl::StrCat("--", flag.name, ": expected ",
                                                                   Alternatives(words), ", got '",
                                                                   flag.value, "'"));
                  }));
}

FlagSet::Decl FlagSet::Custom(absl::string_view name, absl::string_view value_name,
                              absl::string_view help,
                              std::function<absl::Status(const Flag&)> parse) {
  return Decl(
      Add(name, value_name, help, "", [parse = std::move(parse)](const Flag& flag) -> absl::Status {
        if (absl::Status s = RequireValue(flag); !s.ok()) return s;
        return parse(flag);
      }));
}

bool FlagSet::Has(absl::string_view name) const {
  for (const flags_internal::Entry& e : entries_) {
    if (e.name == name) return true;
  }
  return false;
}

bool FlagSet::Given(absl::string_view name) const {
  for (const flags_internal::Entry& e : entries_) {
    if (e.name == name) return e.given;
  }
  return false;
}

namespace {

absl::Status ParseEntry(flags_internal::Entry& e, const Flag& flag) {
  if (absl::Status s = e.parse(flag); !s.ok()) return s;
  if (e.non_empty && flag.has_value && flag.value.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", e.name, " is empty"));
  }
  if (e.check) return e.check(flag);
  return absl::OkStatus();
}

}  // namespace

absl::Status FlagSet::Parse(const std::vector<Flag>& flags) {
  for (const Flag& flag : flags) {
    flags_internal::Entry* entry = nullptr;
    for (flags_internal::Entry& e : entries_) {
      if (e.name == flag.name) entry = &e;
    }
    if (entry == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", flag.name,
                       command_.empty() ? "" : absl::StrCat(" for '", command_, "'")));
    }
    entry->given = true;
    if (absl::Status s = ParseEntry(*entry, flag); !s.ok()) return s;
  }
  for (flags_internal::Entry& e : entries_) {
    if (e.given) continue;
    for (const std::string& var : e.env) {
      const char* value = std::getenv(var.c_str());
      if (value == nullptr || *value == '\0') continue;
      if (absl::Status s = ParseEntry(e, Flag{e.name, value, true}); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("$", var, "=", value, ": ", s.message()));
      }
      e.given = true;
      break;
    }
    if (!e.given && e.required && !command_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("'", command_, "' needs --", e.name));
    }
    if (!e.given && e.required) {
      std::string vars;
      for (const std::string& var : e.env)
        absl::StrAppend(&vars, vars.empty() ? "" : " or ", "$", var);
      return absl::InvalidArgumentError(absl::StrCat(
          "--", e.name, vars.empty() ? "" : absl::StrCat(" (or ", vars, ")"), " is required"));
    }
  }
  return absl::OkStatus();
}

absl::Status FlagSet::ParseCommandLine(int argc, char** argv, bool* help, bool* version) {
  absl::StatusOr<CommandLine> line = SplitCommandLine(argc, argv, accepts_positionals());
  if (!line.ok()) return line.status();
  *help = line->help;
  *version = line->version;
  if (*help || *version) return absl::OkStatus();
  if (positionals_ != nullptr) {
    for (absl::string_view word : line->positionals) positionals_->emplace_back(word);
  }
  return Parse(line->flags);
}

std::string FlagSet::Usage() const {
  std::string out =
      absl::StrCat("usage: ", program_, synopsis_.empty() ? "" : " ", synopsis_, "\n");
  if (!description_.empty()) absl::StrAppend(&out, "\n", description_, "\n");
  absl::StrAppend(&out, "\n", FlagsUsage());
  if (!epilog_.empty()) absl::StrAppend(&out, "\n", epilog_);
  return out;
}

std::string FlagSet::FlagsUsage() const {
  std::string out;
  bool blank = false;  // a blank line is due before the next heading
  for (const auto& [entry, heading] : items_) {
    if (entry == nullptr) {
      absl::StrAppend(&out, blank ? "\n" : "", heading, "\n");
      blank = false;
      continue;
    }
    const flags_internal::Entry& e = *entry;
    std::string flag = absl::StrCat(std::string(kFlagColumn, ' '), "--", e.name,
                                    e.value_name.empty() ? "" : "=", e.value_name);
    if (flag.size() + 1 > kHelpColumn) {
      absl::StrAppend(&out, flag, "\n", std::string(kHelpColumn, ' '));
    } else {
      absl::StrAppend(&out, flag, std::string(kHelpColumn - flag.size(), ' '));
    }
    AppendWrapped(&out, HelpText(e));
    blank = true;
  }
  return out;
}

std::string FlagSet::FlagsSynopsis() const {
  std::string required, optional;
  for (const flags_internal::Entry& e : entries_) {
    const std::string flag =
        absl::StrCat("--", e.name, e.value_name.empty() ? "" : "=", e.value_name);
    if (e.required) {
      absl::StrAppend(&required, required.empty() ? "" : " ", flag);
    } else {
      absl::StrAppend(&optional, optional.empty() ? "" : " ", "[", flag, "]");
    }
  }
  return absl::StrCat(required, !required.empty() && !optional.empty() ? " " : "", optional);
}

// ---- The shared main ----

void DeclareLogFormatFlag(FlagSet& flags, LogFormat* format) {
  flags.Choice<LogFormat>("log_format", format,
                          {{"text", LogFormat::kText}, {"json", LogFormat::kJson}},
                          "the stderr log lines: \"TIME LEVEL COMPONENT: message\" or one JSON "
                          "object each (common/log.h)");
}

int UsageError(absl::string_view program, absl::string_view message,
               absl::string_view help_command) {
  std::cerr << program << ": " << message << "\nsee '" << help_command << " --help'" << std::endl;
  return 2;
}

std::string VersionLine(absl::string_view program) {
  return absl::StrCat(program, " ", BuildVersion(), " (commit ", BuildCommit(), ")");
}

namespace flags_internal {

int RunMain(const char* name, const char* component, FlagSet& flags, int argc, char** argv,
            const std::function<absl::Status()>& finish, const std::function<absl::Status()>& run) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  flags.Section("Every Ember binary:");
  LogFormat log_format = LogFormat::kText;
  DeclareLogFormatFlag(flags, &log_format);
  flags.Custom("version", "", "print \"PROGRAM VERSION (commit COMMIT)\" and exit",
               [](const Flag&) { return absl::OkStatus(); });
  flags.Custom("help", "", "this text; -h is the same",
               [](const Flag&) { return absl::OkStatus(); });
  bool help = false, version = false;
  absl::Status parsed = flags.ParseCommandLine(argc, argv, &help, &version);
  if (parsed.ok() && help) {
    std::cout << flags.Usage();
    return 0;
  }
  if (parsed.ok() && version) {
    std::cout << VersionLine(name) << std::endl;
    return 0;
  }
  // Before anything logs; finish may (a config loaded with notes).
  if (parsed.ok()) InitLogging(component, log_format);
  if (parsed.ok()) parsed = finish();
  if (!parsed.ok()) return UsageError(name, parsed.message(), name);
  KeepFreedBuffers();  // before run() starts threads (common/malloc_tuning.h)
  const absl::Status status = run();
  if (!status.ok()) {
    std::cerr << name << ": " << status << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace flags_internal
}  // namespace ember
