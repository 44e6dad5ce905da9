// Copyright 2026 The Ember Authors.

#include "worker/cuda/cuda_libraries.h"

#include <dlfcn.h>

#include <atomic>
#include <initializer_list>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ember::worker::cuda_internal {
namespace {

// Opens `library` and resolves each symbol into its slot; UNAVAILABLE on the first miss.
absl::Status Load(const char* library,
                  std::initializer_list<std::pair<const char*, void**>> symbols) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    return absl::UnavailableError(absl::StrCat("cannot load ", library, ": ",
                                               error != nullptr ? error : "unknown error",
                                               " (is it installed and on LD_LIBRARY_PATH?)"));
  }
  for (const auto& [name, slot] : symbols) {
    *slot = dlsym(handle, name);
    if (*slot == nullptr) {
      return absl::UnavailableError(
          absl::StrCat(library, " has no symbol ", name, ": too old a version?"));
    }
  }
  return absl::OkStatus();
}

std::atomic<const NcclApi*> loaded_nccl{nullptr};

}  // namespace

absl::StatusOr<const CublasApi*> LoadCublas() {
  static CublasApi api;
  static const absl::Status status =
      Load("libcublas.so.13", {{"cublasCreate_v2", reinterpret_cast<void**>(&api.create)},
                               {"cublasDestroy_v2", reinterpret_cast<void**>(&api.destroy)},
                               {"cublasSetStream_v2", reinterpret_cast<void**>(&api.set_stream)},
                               {"cublasSetMathMode", reinterpret_cast<void**>(&api.set_math_mode)},
                               {"cublasGemmEx", reinterpret_cast<void**>(&api.gemm_ex)}});
  if (!status.ok()) return status;
  return &api;
}

absl::StatusOr<const NcclApi*> LoadNccl() {
  static NcclApi api;
  static const absl::Status status =
      Load("libnccl.so.2",
           {{"ncclGetUniqueId", reinterpret_cast<void**>(&api.get_unique_id)},
            {"ncclCommInitRankConfig", reinterpret_cast<void**>(&api.comm_init_rank_config)},
            {"ncclCommGetAsyncError", reinterpret_cast<void**>(&api.comm_get_async_error)},
            {"ncclCommAbort", reinterpret_cast<void**>(&api.comm_abort)},
            {"ncclCommDestroy", reinterpret_cast<void**>(&api.comm_destroy)},
            {"ncclAllReduce", reinterpret_cast<void**>(&api.all_reduce)},
            {"ncclGetErrorString", reinterpret_cast<void**>(&api.get_error_string)}});
  if (!status.ok()) return status;
  loaded_nccl.store(&api);
  return &api;
}

const NcclApi* LoadedNccl() { return loaded_nccl.load(); }

}  // namespace ember::worker::cuda_internal
