// Copyright 2026 The Ember Authors.
//
// Whether this process's CUDA context is lost: a "sticky" CUDA error (an illegal address
// or instruction in a kernel, a launch failure or timeout, an uncorrectable ECC or NVLink
// error, a device-side assert, an error the GPU contained) leaves the context unusable,
// and every later CUDA call in the process fails the same way. Rebuilding the tower or
// the NCCL communicator in the same process cannot help; only a new process can.
//
//   if (CudaContextLost()) return status;        // Train: no rejoin in this process
//   ...
//   _exit(kExitCudaContextLost);                  // worker_main: the supervisor restarts it
//
// worker/cuda/cuda_status.cc marks it (the one place CUDA errors are translated), so the
// mark survives however the status is wrapped on its way up. Plain C++ (no CUDA headers):
// a build without CUDA links it too, and there it is never set. Thread-safe.

#ifndef EMBER_WORKER_CUDA_CONTEXT_LOST_H_
#define EMBER_WORKER_CUDA_CONTEXT_LOST_H_

#include <string>

namespace ember::worker {

// ember-worker's exit code when its CUDA context is lost: 75 ("restart me", EX_TEMPFAIL),
// the code ember-ps uses for the same request. deploy/local/cluster.sh's supervisor
// restarts a process that exits 75; Kubernetes restarts any failed container. The
// restarted worker rejoins the job like one restarted after a crash.
inline constexpr int kExitCudaContextLost = 75;

// Whether a sticky CUDA error was seen in this process.
bool CudaContextLost();
// The first sticky error's message ("" while none).
std::string CudaContextLostReason();

namespace cuda_internal {
// Records a sticky error (the first one's message is kept). Called by CudaStatus.
void MarkCudaContextLost(const std::string& message);
}  // namespace cuda_internal

}  // namespace ember::worker

#endif  // EMBER_WORKER_CUDA_CONTEXT_LOST_H_
