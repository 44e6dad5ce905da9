// Copyright 2026 The Ember Authors.
//
// Command-line handling shared by Ember's binaries: `--name=value` flags, each declared
// once in a FlagSet (name, value, default, allowed range or values, help text), bound to
// a field of the binary's plain options struct. The usage text (--help) and the parser
// are generated from the declarations; the default is the field's value when it is
// declared. Exit codes every script can rely on: 0 success (and --help, --version),
// 1 the run failed, 2 bad usage (one line naming the problem, then a hint to --help).
//
//   struct FooOptions { std::string data_dir; uint32_t port = 0; bool wal = true; };
//   void Declare(FlagSet& flags, FooOptions& o) {
//     flags.Synopsis("--data_dir=DIR [--flag=value ...]");
//     flags.String("data_dir", &o.data_dir, "DIR", "where the data lives").Required();
//     flags.Number("port", &o.port, "N", "port to bind; 0 picks a free one").Max(65535);
//     flags.Bool("wal", &o.wal, "RocksDB write-ahead log");
//   }
//   absl::Status Run(const FooOptions& options);
//   int main(int argc, char** argv) {
//     return RunMain<FooOptions>({"ember-foo", "foo", Declare, nullptr, Run}, argc, argv);
//   }
//
// Every binary run through RunMain also takes --help (-h), --version ("ember-foo 0.2.0
// (commit abc1234)") and --log_format=text|json (common/log.h).

#ifndef EMBER_COMMON_FLAGS_H_
#define EMBER_COMMON_FLAGS_H_

#include <charconv>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/log.h"

namespace ember {

struct Flag {
  absl::string_view name;   // without the leading "--"
  absl::string_view value;  // empty when !has_value
  bool has_value = false;
};

// ---- Single-flag helpers (also for Custom and Check callbacks) ----

// INVALID_ARGUMENT unless the flag has a value.
absl::Status RequireValue(const Flag& flag);

// Parses a whole decimal number into *out; INVALID_ARGUMENT naming the flag otherwise.
template <typename T>
absl::Status ParseNumber(const Flag& flag, T* out) {
  if (absl::Status s = RequireValue(flag); !s.ok()) return s;
  const absl::string_view text = flag.value;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag.name, ": bad number '", text, "'"));
  }
  return absl::OkStatus();
}

// `--name` alone, `=true`/`=1` and `=false`/`=0`.
absl::Status ParseBool(const Flag& flag, bool* out);

// Copies the flag's value into *out (which must then be non-empty to be useful).
absl::Status ParseString(const Flag& flag, std::string* out);

// The command line split: flags, and words that are not flags (an error unless the
// caller accepts positional arguments).
struct CommandLine {
  std::vector<Flag> flags;
  std::vector<absl::string_view> positionals;
  bool help = false;     // --help or -h
  bool version = false;  // --version
};
// INVALID_ARGUMENT "unexpected argument 'X'" for a word that is not a flag when
// !accept_positionals (and for "--" or a lone "-x").
absl::StatusOr<CommandLine> SplitCommandLine(int argc, char** argv, bool accept_positionals);

// ---- The declarative flag set ----

// "[lo, hi]"-style bounds of a number flag, checked at parse time and shown in the
// usage. Integer bounds that are large powers of two print as 2^N.
template <typename T>
struct NumberRange {
  std::optional<T> lo, hi;
  bool lo_open = false;  // (lo, ...: the value must be > lo
};

namespace flags_internal {
// One declaration, as FlagSet keeps it.
struct Entry {
  std::string name;
  std::string value_name;  // "N" in --port=N; empty for a bool
  std::string help;
  std::string default_text;  // from the field at declaration; empty: none shown
  std::string range_text;    // "[1, 2047]", ">= 1"; empty: any
  std::vector<std::string> env;
  bool required = false;
  bool non_empty = false;
  bool given = false;
  std::function<absl::Status(const Flag&)> parse;
  std::function<absl::Status(const Flag&)> check;
};
}  // namespace flags_internal

class FlagSet {
 public:
  // One declared flag; the handle refines it. Handles stay valid while the set lives.
  class Decl {
   public:
    // The flag must be given (or come from its environment variable).
    Decl& Required();
    // When the flag is not given, the first of these variables that is set and not
    // empty gives its value (parsed and checked like the flag).
    Decl& Env(std::initializer_list<absl::string_view> variables);
    // What the usage says the default is, instead of the field's value ("--host").
    Decl& DefaultText(absl::string_view text);
    // The value must not be empty: INVALID_ARGUMENT "--NAME is empty".
    Decl& NonEmpty();
    // An extra check of the raw value after it parsed; its error is the flag's error.
    Decl& Check(std::function<absl::Status(const Flag&)> check);

   protected:
    friend class FlagSet;
    using Entry = flags_internal::Entry;
    explicit Decl(Entry* entry) : entry_(entry) {}
    Entry* entry_;
  };

  // A number flag: bounds on top of Decl.
  template <typename T>
  class NumberDecl : public Decl {
   public:
    NumberDecl& Range(T lo, T hi) { return Set(lo, hi, false); }
    // (lo, hi]: above lo, at most hi.
    NumberDecl& RangeAbove(T lo, T hi) { return Set(lo, hi, true); }
    NumberDecl& Min(T lo) { return Set(lo, std::nullopt, false); }
    NumberDecl& Above(T lo) { return Set(lo, std::nullopt, true); }
    NumberDecl& Max(T hi) { return Set(std::nullopt, hi, false); }

   private:
    friend class FlagSet;
    NumberDecl(Entry* entry, std::shared_ptr<NumberRange<T>> range)
        : Decl(entry), range_(std::move(range)) {}
    NumberDecl& Set(std::optional<T> lo, std::optional<T> hi, bool lo_open);
    std::shared_ptr<NumberRange<T>> range_;
  };

  explicit FlagSet(std::string program);
  FlagSet(const FlagSet&) = delete;
  FlagSet& operator=(const FlagSet&) = delete;
  ~FlagSet();

  // The usage's first line is "usage: PROGRAM SYNOPSIS"; the description follows it as a
  // paragraph (line breaks kept); the epilog ends the usage.
  void Synopsis(absl::string_view synopsis) { synopsis_ = std::string(synopsis); }
  void Description(absl::string_view text) { description_ = std::string(text); }
  void Epilog(absl::string_view text) { epilog_ = std::string(text); }
  // A heading before the flags declared after it.
  void Section(absl::string_view heading);
  // Words that are not flags go to *out (otherwise they are "unexpected argument").
  void Positionals(std::vector<std::string>* out) { positionals_ = out; }
  bool accepts_positionals() const { return positionals_ != nullptr; }
  // The flags belong to a subcommand (emberctl's "slots move"): an unknown flag is
  // "unknown flag --X for 'COMMAND'", a missing required one "'COMMAND' needs --X".
  void ForCommand(absl::string_view command) { command_ = std::string(command); }

  // `--NAME=VALUE` into *field. The usage shows `--NAME=VALUE_NAME`.
  template <typename T>
  NumberDecl<T> Number(absl::string_view name, T* field, absl::string_view value_name,
                       absl::string_view help) {
    return AddNumber<T>(name, value_name, help, FormatNumber(*field), [field](T v) { *field = v; });
  }
  // Unset (no default) unless given.
  template <typename T>
  NumberDecl<T> Number(absl::string_view name, std::optional<T>* field,
                       absl::string_view value_name, absl::string_view help) {
    return AddNumber<T>(name, value_name, help,
                        field->has_value() ? FormatNumber(**field) : std::string(),
                        [field](T v) { *field = v; });
  }
  // Whole milliseconds into a duration.
  NumberDecl<int64_t> Millis(absl::string_view name, absl::Duration* field, absl::string_view help);
  // Seconds (a decimal number) into a duration.
  NumberDecl<double> Seconds(absl::string_view name, absl::Duration* field, absl::string_view help);
  Decl String(absl::string_view name, std::string* field, absl::string_view value_name,
              absl::string_view help);
  Decl String(absl::string_view name, std::optional<std::string>* field,
              absl::string_view value_name, absl::string_view help);
  // `--NAME`, `--NAME=true|1`, `--NAME=false|0`.
  Decl Bool(absl::string_view name, bool* field, absl::string_view help);
  // One of a fixed list of words: "--NAME: expected a, b or c, got 'x'" otherwise.
  template <typename T>
  Decl Choice(absl::string_view name, T* field, std::vector<std::pair<std::string, T>> choices,
              absl::string_view help) {
    std::string default_text;
    for (const auto& [word, value] : choices) {
      if (value == *field) default_text = word;
    }
    return AddChoice(name, help, std::move(default_text), Words(choices),
                     [field, choices](size_t i) { *field = choices[i].second; });
  }
  template <typename T>
  Decl Choice(absl::string_view name, std::optional<T>* field,
              std::vector<std::pair<std::string, T>> choices, absl::string_view help) {
    return AddChoice(name, help, "", Words(choices),
                     [field, choices](size_t i) { *field = choices[i].second; });
  }
  // Anything else: `parse` gets the flag (with a value) and stores what it means.
  Decl Custom(absl::string_view name, absl::string_view value_name, absl::string_view help,
              std::function<absl::Status(const Flag&)> parse);

  // Parses the flags into the bound fields, in order (the last of a repeated flag wins),
  // then fills flags not given from their environment variables and checks the required
  // ones. INVALID_ARGUMENT naming the flag: an unknown flag, a missing value, a bad
  // number, a value out of range or not among the choices, a missing required flag.
  absl::Status Parse(const std::vector<Flag>& flags);
  // SplitCommandLine and Parse (positionals go where Positionals said); *help and
  // *version report --help and --version, and then nothing is parsed.
  absl::Status ParseCommandLine(int argc, char** argv, bool* help, bool* version);

  // Whether `name` is declared here.
  bool Has(absl::string_view name) const;
  // Whether `name` was given on the command line (after Parse).
  bool Given(absl::string_view name) const;

  // The whole --help text.
  std::string Usage() const;
  // Only the flags and their headings (for a usage assembled elsewhere).
  std::string FlagsUsage() const;
  // The flags on one line, the required ones first: "--to=N [--dry_run] [--bytes=N]".
  std::string FlagsSynopsis() const;
  const std::string& program() const { return program_; }

 private:
  // Large powers of two print as 2^N in ranges (pow2), never in defaults.
  template <typename T>
  static std::string FormatNumber(T value, bool pow2 = false);
  template <typename T>
  static std::vector<std::string> Words(const std::vector<std::pair<std::string, T>>& choices) {
    std::vector<std::string> words;
    for (const auto& choice : choices) words.push_back(choice.first);
    return words;
  }
  template <typename T>
  NumberDecl<T> AddNumber(absl::string_view name, absl::string_view value_name,
                          absl::string_view help, std::string default_text,
                          std::function<void(T)> store);
  Decl AddChoice(absl::string_view name, absl::string_view help, std::string default_text,
                 std::vector<std::string> words, std::function<void(size_t)> store);
  flags_internal::Entry* Add(absl::string_view name, absl::string_view value_name,
                             absl::string_view help, std::string default_text,
                             std::function<absl::Status(const Flag&)> parse);
  // The range's usage text and its error for `value` (empty when inside).
  template <typename T>
  static std::string RangeText(const NumberRange<T>& range);
  static void SetRangeText(flags_internal::Entry* entry, std::string text);

  std::string program_;
  std::string synopsis_;
  std::string description_;
  std::string epilog_;
  std::string command_;  // ForCommand
  std::vector<std::string>* positionals_ = nullptr;
  std::deque<flags_internal::Entry> entries_;
  // Usage order: an entry, or a heading (entry == nullptr).
  std::vector<std::pair<const flags_internal::Entry*, std::string>> items_;
};

// ---- Template definitions ----

template <typename T>
std::string FlagSet::FormatNumber(T value, bool pow2) {
  if constexpr (std::is_floating_point_v<T>) {
    return absl::StrCat(value);
  } else {
    // 2^N for large powers of two (ranges like [1, 2^30]).
    if (pow2 && value >= (T{1} << 16) && (value & (value - 1)) == 0) {
      int bits = 0;
      while ((T{1} << bits) != value) ++bits;
      return absl::StrCat("2^", bits);
    }
    return absl::StrCat(value);
  }
}

template <typename T>
std::string FlagSet::RangeText(const NumberRange<T>& r) {
  if (r.lo && r.hi) {
    return absl::StrCat(r.lo_open ? "(" : "[", FormatNumber(*r.lo, true), ", ",
                        FormatNumber(*r.hi, true), "]");
  }
  if (r.lo) return absl::StrCat(r.lo_open ? "> " : ">= ", FormatNumber(*r.lo, true));
  if (r.hi) return absl::StrCat("<= ", FormatNumber(*r.hi, true));
  return "";
}

template <typename T>
FlagSet::NumberDecl<T>& FlagSet::NumberDecl<T>::Set(std::optional<T> lo, std::optional<T> hi,
                                                    bool lo_open) {
  range_->lo = lo;
  range_->hi = hi;
  range_->lo_open = lo_open;
  SetRangeText(entry_, RangeText(*range_));
  return *this;
}

template <typename T>
FlagSet::NumberDecl<T> FlagSet::AddNumber(absl::string_view name, absl::string_view value_name,
                                          absl::string_view help, std::string default_text,
                                          std::function<void(T)> store) {
  auto range = std::make_shared<NumberRange<T>>();
  flags_internal::Entry* entry = Add(
      name, value_name, help, std::move(default_text),
      [range, store = std::move(store)](const Flag& flag) -> absl::Status {
        T value{};
        if (absl::Status s = ParseNumber(flag, &value); !s.ok()) return s;
        const NumberRange<T>& r = *range;
        const bool low = r.lo && (r.lo_open ? !(value > *r.lo) : !(value >= *r.lo));
        const bool high = r.hi && !(value <= *r.hi);
        if (low || high) {
          const std::string text = RangeText(r);
          return absl::InvalidArgumentError(absl::StrCat(
              "--", flag.name, " must be ", r.lo && r.hi ? "in " : "", text, ", not ", flag.value));
        }
        store(value);
        return absl::OkStatus();
      });
  return NumberDecl<T>(entry, std::move(range));
}

// ---- The shared main ----

// A binary's flags and run. `declare` binds the flags to the fields of a
// default-constructed Options (their values are the defaults); `finish`, when set,
// checks the flags together and derives fields after parsing (INVALID_ARGUMENT there is
// a usage error, exit 2); `run` runs (an error: exit 1, "PROGRAM: <status>" on stderr).
template <typename Options>
struct Program {
  const char* name;       // "ember-ps": --version, messages
  const char* component;  // "ps": the logs' component (common/log.h)
  std::function<void(FlagSet&, Options&)> declare;
  std::function<absl::Status(Options&)> finish;
  std::function<absl::Status(const Options&)> run;
};

namespace flags_internal {
// RunMain without the template: adds --log_format and --version to `flags`, turns off
// Abseil's mutex deadlock detection (Debian's build has it on: a global lock and ~40 ns
// per acquisition; tests keep it), parses, handles --help and --version, initializes
// logging (InitLogging(component, --log_format)), finishes, keeps freed RPC buffers for
// reuse (KeepFreedBuffers, common/malloc_tuning.h), runs, and maps the outcome to the
// exit codes.
int RunMain(const char* name, const char* component, FlagSet& flags, int argc, char** argv,
            const std::function<absl::Status()>& finish, const std::function<absl::Status()>& run);
}  // namespace flags_internal

// "PROGRAM: MESSAGE\nsee 'HELP_COMMAND --help'\n" on stderr; returns 2 (the usage
// exit code). `help_command` is what to run for the usage ("emberctl slots move").
int UsageError(absl::string_view program, absl::string_view message,
               absl::string_view help_command);

// --log_format=text|json into *format (common/log.h); RunMain declares it.
void DeclareLogFormatFlag(FlagSet& flags, LogFormat* format);

// "PROGRAM VERSION (commit COMMIT)" (common/build_info.h).
std::string VersionLine(absl::string_view program);

template <typename Options>
int RunMain(const Program<Options>& program, int argc, char** argv) {
  Options options;
  FlagSet flags(program.name);
  program.declare(flags, options);
  return flags_internal::RunMain(
      program.name, program.component, flags, argc, argv,
      [&] { return program.finish ? program.finish(options) : absl::OkStatus(); },
      [&] { return program.run(options); });
}

}  // namespace ember

#endif  // EMBER_COMMON_FLAGS_H_
