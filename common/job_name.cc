// Copyright 2026 The Ember Authors.

#include "common/job_name.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/clip.h"

namespace ember {

bool ValidJobName(absl::string_view name) {
  if (name.empty() || name.size() > 128 || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

absl::Status CheckJobName(absl::string_view name) {
  if (ValidJobName(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "job name '", ClipForMessage(name), "' is not [A-Za-z0-9._-]{1,128} (nor '.' or '..')"));
}

}  // namespace ember
