// Copyright 2026 The Ember Authors.
//
// DeviceCollective over NCCL (device_collective.h). NCCL runs in non-blocking mode
// (ncclConfig_t.blocking = 0) so every wait is a poll with a deadline; NCCL and CUDA
// results become absl::Status in worker/cuda/cuda_status.cc only. A failed or late
// all-reduce aborts the communicator there and then (ncclCommAbort ends its kernel on
// the caller's stream, so the tower's later work on that stream does not wait behind
// it forever), and each call selects the collective's device on the calling thread.

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/cluster_token.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "grpcpp/create_channel.h"
#include "worker/collective/coordinator_store.h"
#include "worker/collective/device_collective.h"
#include "worker/cuda/cuda_libraries.h"
#include "worker/cuda/cuda_status.h"

namespace ember::worker {
namespace {

using cuda_internal::CudaStatus;
using cuda_internal::LoadNccl;
using cuda_internal::NcclApi;
using cuda_internal::NcclStatus;

// Polls `comm` until its pending operation is no longer in progress, or the deadline:
// then aborts it (DEADLINE_EXCEEDED naming `what`).
absl::Status WaitComm(const NcclApi& nccl, ncclComm_t comm, absl::Time deadline,
                      const std::string& what) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = nccl.comm_get_async_error(comm, &state);
    if (r != ncclSuccess) return NcclStatus(r, what);
    if (state != ncclInProgress) return NcclStatus(state, what);
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, " did not finish in time"));
    }
    absl::SleepFor(absl::Microseconds(20));  // polling pace of a non-blocking NCCL call
  }
}

class NcclCollective final : public DeviceCollective {
 public:
  NcclCollective(const NcclApi& nccl, int rank, int world_size, absl::Duration timeout,
                 int cuda_device, ncclComm_t comm)
      : nccl_(nccl),
        rank_(rank),
        world_size_(world_size),
        timeout_(timeout),
        cuda_device_(cuda_device),
        comm_(comm) {}
  ~NcclCollective() override {
    if (comm_ == nullptr) return;  // aborted at its failure
    cudaSetDevice(cuda_device_);
    nccl_.comm_destroy(comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  absl::Status AllReduceSum(absl::Span<float> data, void* stream) override {
    if (broken_) {
      return absl::FailedPreconditionError("the NCCL collective failed before; reconnect");
    }
    if (data.empty()) return absl::OkStatus();
    const absl::Time deadline = absl::Now() + timeout_;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    absl::Status status = CudaStatus(cudaSetDevice(cuda_device_),
                                     absl::StrCat("selecting CUDA device ", cuda_device_));
    if (status.ok()) {
      status = NcclStatus(
          nccl_.all_reduce(data.data(), data.data(), data.size(), ncclFloat, ncclSum, comm_, s),
          "the dense gradient all-reduce");
    }
    if (status.ok()) status = WaitComm(nccl_, comm_, deadline, "the dense gradient all-reduce");
    // The enqueued reduction runs on the stream; wait for it with the same deadline, and
    // watch for a peer's failure meanwhile.
    while (status.ok()) {
      const cudaError_t q = cudaStreamQuery(s);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) {
        status = CudaStatus(q, "the dense gradient all-reduce");
        break;
      }
      ncclResult_t async = ncclSuccess;
      nccl_.comm_get_async_error(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        status = NcclStatus(async, "the dense gradient all-reduce (a peer failed)");
        break;
      }
      if (absl::Now() > deadline) {
        status = absl::DeadlineExceededError(
            absl::StrCat("the dense gradient all-reduce did not finish within ",
                         absl::FormatDuration(timeout_), " (a peer is stuck or gone)"));
        break;
      }
      absl::SleepFor(absl::Microseconds(20));  // polling pace
    }
    if (!status.ok()) Abort();
    return status;
  }

 private:
  // Ends the communicator at once: its kernels on the callers' streams return, and
  // peers blocked in it see it fail. The collective stays broken.
  void Abort() {
    broken_ = true;
    if (comm_ == nullptr) return;
    nccl_.comm_abort(comm_);  // its result: the communicator is gone either way
    comm_ = nullptr;
  }

  const NcclApi& nccl_;
  const int rank_;
  const int world_size_;
  const absl::Duration timeout_;
  const int cuda_device_;
  ncclComm_t comm_;  // null once aborted
  bool broken_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceCollective>> DeviceCollective::Connect(
    const CollectiveOptions& options, int cuda_device) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL collective: rank ", options.rank,
                                                   " of world size ", options.world_size));
  }
  if (options.timeout < absl::Milliseconds(1) || options.timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("NCCL collective: the timeout must be finite and >= 1 ms");
  }
  if (options.world_size > 1 && options.coordinator_address.empty()) {
    return absl::InvalidArgumentError("NCCL collective: world size > 1 needs a coordinator");
  }
  EMBER_ASSIGN_OR_RETURN(const NcclApi* nccl, LoadNccl());
  EMBER_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(cuda_device), "selecting the NCCL device"));
  const absl::Time deadline = absl::Now() + options.timeout;

  // The unique id: made by rank 0, shared through the coordinator.
  ncclUniqueId id;
  if (options.rank == 0) {
    EMBER_RETURN_IF_ERROR(NcclStatus(nccl->get_unique_id(&id), "making the NCCL unique id"));
  }
  if (options.world_size > 1) {
    CoordinatorStore store(CreateClusterChannel(options.coordinator_address,
                                                options.channel_credentials, options.cluster_token),
                           options.coordinator_address,
                           absl::StrCat("rdzv/", options.job, "/", options.generation, "/nccl/"),
                           deadline);
    if (options.rank == 0) {
      EMBER_RETURN_IF_ERROR(
          store.Set("id", absl::string_view(reinterpret_cast<const char*>(&id), sizeof(id))));
    } else {
      EMBER_ASSIGN_OR_RETURN(const std::string value, store.Get("id", deadline));
      if (value.size() != sizeof(id)) {
        return absl::InternalError(absl::StrCat("NCCL unique id from the coordinator has ",
                                                value.size(), " bytes; want ", sizeof(id)));
      }
      std::memcpy(&id, value.data(), sizeof(id));
    }
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  absl::Status s =
      NcclStatus(nccl->comm_init_rank_config(&comm, options.world_size, id, options.rank, &config),
                 "creating the NCCL communicator");
  if (s.ok() && comm != nullptr)
    s = WaitComm(*nccl, comm, deadline, "creating the NCCL communicator");
  if (!s.ok()) {
    if (comm != nullptr) nccl->comm_abort(comm);
    return s;
  }
  return std::make_unique<NcclCollective>(*nccl, options.rank, options.world_size, options.timeout,
                                          cuda_device, comm);
}

}  // namespace ember::worker
