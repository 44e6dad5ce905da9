// Copyright 2026 The Ember Authors.
//
// The pybind11 module `ember._ember`: the native worker's runtime, bound for Python
// (docs/PYTHON.md). Python holds the user's dense model and the loop; everything that
// talks to the cluster or parses data runs here, with the GIL released around every
// blocking call:
//
//   module.cc           errors (absl::Status -> ember.errors), model configs, the reader
//   ps_bindings.cc      Client (PsClient), SparseLookup (one batch's unique IDs, pulls,
//                       pushes, the BSP exchange), ServingClient
//   worker_bindings.cc  Collective (Gloo), JobClient (the coordinator's job protocol)
//
// Arrays cross as NumPy buffers (torch.from_numpy on the Python side is zero-copy), so
// the module never links libtorch and works with any torch a user has.

#ifndef EMBER_PYTHON_NATIVE_BINDINGS_H_
#define EMBER_PYTHON_NATIVE_BINDINGS_H_

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tls.h"
#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "worker/collective/collective.h"

namespace ember::python {

namespace py = pybind11;

// A failed absl::Status on its way to Python: module.cc's translator raises it as the
// ember.errors class of its code (EmberError subclasses carrying .code and .message).
class StatusError : public std::exception {
 public:
  explicit StatusError(absl::Status status)
      : status_(std::move(status)), what_(status_.ToString()) {}
  const absl::Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  absl::Status status_;
  std::string what_;
};

inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw StatusError(status);
}
template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  ThrowIfError(value.status());
  return *std::move(value);
}
// INVALID_ARGUMENT as an ember.errors.InvalidArgumentError (also a ValueError).
[[noreturn]] inline void ThrowInvalid(const std::string& message) {
  throw StatusError(absl::InvalidArgumentError(message));
}

// The IDs of `what` as uint64: a 1-D int64 or uint64 array (int64 bits are taken as
// they are: torch has no uint64, and hashed IDs use all 64 bits). Anything else is
// INVALID_ARGUMENT naming `what` and the dtype or shape. Copies only a non-contiguous
// array.
std::vector<uint64_t> IdsFromArray(const py::handle& array, const std::string& what);
// A float32 array of exactly `shape`, C-contiguous (copied when not); INVALID_ARGUMENT
// naming `what` otherwise.
py::array_t<float, py::array::c_style> FloatsFromArray(const py::handle& array,
                                                       const std::vector<py::ssize_t>& shape,
                                                       const std::string& what);
// Loads --tls_ca / --tls_cert / --tls_key style files ("" all three: plaintext).
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const std::string& ca,
                                                             const std::string& cert,
                                                             const std::string& key);
// The cluster token of a plaintext cluster (common/cluster_token.h), from the file
// $EMBER_CLUSTER_TOKEN_FILE names, as ember-worker reads it; "" when unset or with TLS
// (`tls`: the certificates decide). INVALID_ARGUMENT for an unreadable or empty file.
std::string ClusterTokenFromEnv(bool tls);

// The Gloo collective behind a Python `Collective` object (worker_bindings.cc);
// INVALID_ARGUMENT for any other object.
worker::Collective* CollectiveOf(const py::object& object);

void BindPs(py::module_& m);
void BindWorker(py::module_& m);

}  // namespace ember::python

#endif  // EMBER_PYTHON_NATIVE_BINDINGS_H_
