// Copyright 2026 The Ember Authors.
//
// NoopPsService: a PsService that does no work, the gRPC transport ceiling of the
// cluster suite (cluster_bench.cc).
//
// Pull answers every request with one PullResponse of `pull_values_bytes` zero bytes,
// serialized once at construction and handed to gRPC as a reference-counted
// ByteBuffer: the handler neither parses the request nor touches the response's
// memory. Push answers an empty PushResponse. CreateTable and GetShardInfo are
// UNIMPLEMENTED. All four are raw callback methods that finish inline, like
// PsServiceImpl's handlers, so the only difference from ember-ps is the work.
//
// It runs in its own process (ember-noop-ps, cluster_noop_main.cc) so that, like
// ember-ps, it competes with the benchmark client for the CPUs.
//
// Thread-safety: the handlers may run concurrently; the service is immutable.

#ifndef EMBER_TOOLS_BENCH_NOOP_SERVER_H_
#define EMBER_TOOLS_BENCH_NOOP_SERVER_H_

#include <cstddef>

#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/support/byte_buffer.h"

namespace ember::bench {

class NoopPsService final
    : public v1::PsService::WithRawCallbackMethod_Pull<v1::PsService::WithRawCallbackMethod_Push<
          v1::PsService::WithRawCallbackMethod_CreateTable<
              v1::PsService::WithRawCallbackMethod_GetShardInfo<v1::PsService::Service>>>> {
 public:
  // Every Pull returns `pull_values_bytes` zero bytes (1000 keys x 64 float32: 256000).
  explicit NoopPsService(size_t pull_values_bytes);

  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* CreateTable(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetShardInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;

 private:
  grpc::ByteBuffer pull_response_;  // serialized PullResponse, shared by every call
  grpc::ByteBuffer push_response_;  // serialized empty PushResponse
};

}  // namespace ember::bench

#endif  // EMBER_TOOLS_BENCH_NOOP_SERVER_H_
