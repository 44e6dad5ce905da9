// Copyright 2026 The Ember Authors.
//
// Training-job names. A job's name becomes a directory on the coordinator (its
// checkpoints: <checkpoint_dir>/<job>/) and on every PS shard (its store:
// <data_dir>.jobs/<job>/), so it is checked wherever it arrives from a client.
//
//   EMBER_RETURN_IF_ERROR(CheckJobName(request.job()));

#ifndef EMBER_COMMON_JOB_NAME_H_
#define EMBER_COMMON_JOB_NAME_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ember {

// [A-Za-z0-9._-]{1,128}, except "." and ".." (they name directories that are not the
// job's own).
bool ValidJobName(absl::string_view name);

// OK for a valid name; INVALID_ARGUMENT quoting it (clipped) otherwise.
absl::Status CheckJobName(absl::string_view name);

}  // namespace ember

#endif  // EMBER_COMMON_JOB_NAME_H_
