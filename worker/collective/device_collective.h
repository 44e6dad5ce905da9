// Copyright 2026 The Ember Authors.
//
// DeviceCollective: the GPU workers' all-reduce of dense gradients in device memory,
// over NCCL. The NCCL unique id travels through the coordinator's key-value store (the
// same rendezvous as the Gloo Collective), so GPU workers on different machines meet
// without a shared file or MPI. Gloo (collective.h) stays the CPU path, and carries the
// step's small host-side sums even on GPU workers.
//
//   absl::StatusOr<std::unique_ptr<DeviceCollective>> nccl =
//       DeviceCollective::Connect(options, /*cuda_device=*/0);
//   EMBER_RETURN_IF_ERROR((*nccl)->AllReduceSum(tower->step_gradients(), tower->cuda_stream()));
//
// Every wait has the options' deadline: the rendezvous, the communicator's set-up and
// each all-reduce (NCCL runs non-blocking and is polled; a stuck or dead peer makes the
// call abort the communicator before it returns, and fail with DEADLINE_EXCEEDED, or
// UNAVAILABLE when NCCL reports the peer's error; the abort ends the reduction's kernel,
// so the caller's stream runs on). After an error the collective is broken and every
// later call fails with FAILED_PRECONDITION; a job reconnects with a new generation.
// Every rank gets the same bits (NCCL's ring reduces each chunk once and broadcasts it),
// but not the bits of the Gloo path. One GPU per rank: NCCL itself refuses two ranks
// on one GPU.
//
// Thread-safety: one call at a time, from any thread (each call selects the device).

#ifndef EMBER_WORKER_COLLECTIVE_DEVICE_COLLECTIVE_H_
#define EMBER_WORKER_COLLECTIVE_DEVICE_COLLECTIVE_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/collective/collective.h"

namespace ember::worker {

class DeviceCollective {
 public:
  // Rank 0 makes the NCCL unique id and publishes it under
  // "rdzv/<job>/<generation>/nccl/id"; the other ranks wait for it (until the timeout),
  // then all create the communicator on `cuda_device`. world_size 1 needs no coordinator.
  // INVALID_ARGUMENT for bad options; UNIMPLEMENTED in a build without CUDA; UNAVAILABLE
  // without the device or the coordinator; DEADLINE_EXCEEDED when rank 0's id or a peer
  // did not come in time.
  static absl::StatusOr<std::unique_ptr<DeviceCollective>> Connect(const CollectiveOptions& options,
                                                                   int cuda_device);
  virtual ~DeviceCollective() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // In-place sum over ranks of `data` (device memory), enqueued on `stream` (a
  // cudaStream_t; the caller's earlier work on it is ordered before) and waited for.
  // Empty data: OK. Every rank must pass the same size.
  virtual absl::Status AllReduceSum(absl::Span<float> data, void* stream) = 0;
};

}  // namespace ember::worker

#endif  // EMBER_WORKER_COLLECTIVE_DEVICE_COLLECTIVE_H_
