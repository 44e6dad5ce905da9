// Copyright 2026 The Ember Authors.
//
// Command-line handling shared by Ember's binaries: `--name=value` flags, parsed once
// in main into a plain options struct, with exit codes every script can rely on:
// 0 success (and --help), 1 the run failed, 2 bad usage (the message and the usage
// text go to stderr).
//
//   absl::StatusOr<MyOptions> Parse(const std::vector<Flag>& flags);
//   absl::Status Run(const MyOptions& options);
//   int main(int argc, char** argv) {
//     return RunMain("ember-foo", kUsage, argc, argv, Parse, Run);
//   }

#ifndef EMBER_COMMON_FLAGS_H_
#define EMBER_COMMON_FLAGS_H_

#include <charconv>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ember {

struct Flag {
  absl::string_view name;   // without the leading "--"
  absl::string_view value;  // empty when !has_value
  bool has_value = false;
};

// Splits argv[1..] into flags. Sets *help for --help or -h. INVALID_ARGUMENT for an
// argument that is not a flag.
absl::StatusOr<std::vector<Flag>> SplitFlags(int argc, char** argv, bool* help);

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

// A string flag of a group: true when flag.name is one of the names in `targets`, whose
// string then gets the value (*status as ParseString); false for any other flag.
bool ParseStringOf(const Flag& flag,
                   std::initializer_list<std::pair<absl::string_view, std::string*>> targets,
                   absl::Status* status);

// The shared main: turns off Abseil's mutex deadlock detection (Debian's build has it
// on: a global lock and ~40 ns per acquisition; tests keep it), parses, handles
// --help, runs, and maps the outcome to the exit codes above.
template <typename Options>
int RunMain(const char* program, const char* usage, int argc, char** argv,
            const std::function<absl::StatusOr<Options>(const std::vector<Flag>&)>& parse,
            const std::function<absl::Status(const Options&)>& run) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  bool help = false;
  absl::StatusOr<std::vector<Flag>> flags = SplitFlags(argc, argv, &help);
  if (flags.ok() && help) {
    std::cout << usage;
    return 0;
  }
  absl::StatusOr<Options> options =
      flags.ok() ? parse(*flags) : absl::StatusOr<Options>(flags.status());
  if (!options.ok()) {
    std::cerr << program << ": " << options.status().message() << "\n\n" << usage;
    return 2;
  }
  const absl::Status status = run(*options);
  if (!status.ok()) {
    std::cerr << program << ": " << status << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace ember

#endif  // EMBER_COMMON_FLAGS_H_
