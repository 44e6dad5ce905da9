// Copyright 2026 The Ember Authors.
//
// DeviceCollective in a build without CUDA.

#include "worker/collective/device_collective.h"

namespace ember::worker {

absl::StatusOr<std::unique_ptr<DeviceCollective>> DeviceCollective::Connect(
    const CollectiveOptions&, int) {
  return absl::UnimplementedError(
      "NCCL all-reduce needs a build with CUDA (no nvcc at configure time)");
}

}  // namespace ember::worker
