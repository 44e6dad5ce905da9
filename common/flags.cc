// Copyright 2026 The Ember Authors.

#include "common/flags.h"

namespace ember {

absl::StatusOr<std::vector<Flag>> SplitFlags(int argc, char** argv, bool* help) {
  std::vector<Flag> flags;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      continue;
    }
    if (arg.substr(0, 2) != "--" || arg.size() == 2) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    arg.remove_prefix(2);
    const size_t eq = arg.find('=');
    Flag flag;
    flag.name = arg.substr(0, eq);
    flag.has_value = eq != absl::string_view::npos;
    if (flag.has_value) flag.value = arg.substr(eq + 1);
    flags.push_back(flag);
  }
  return flags;
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

bool ParseStringOf(const Flag& flag,
                   std::initializer_list<std::pair<absl::string_view, std::string*>> targets,
                   absl::Status* status) {
  for (const auto& [name, target] : targets) {
    if (flag.name == name) {
      *status = ParseString(flag, target);
      return true;
    }
  }
  return false;
}

}  // namespace ember
