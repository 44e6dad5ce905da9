// Copyright 2026 The Ember Authors.

#include "tools/bench/noop_server.h"

#include <string>

#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/status.h"

namespace ember::bench {
namespace {

template <typename Message>
grpc::ByteBuffer Serialize(const Message& message) {
  grpc::ByteBuffer buffer;
  bool own_buffer = false;
  // Cannot fail below 2 GiB; a broken buffer would show as a client parse error.
  (void)grpc::SerializationTraits<Message>::Serialize(message, &buffer, &own_buffer);
  return buffer;
}

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context, grpc::Status status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

}  // namespace

NoopPsService::NoopPsService(size_t pull_values_bytes) {
  v1::PullResponse pull;
  pull.set_values(std::string(pull_values_bytes, '\0'));
  pull_response_ = Serialize(pull);
  push_response_ = Serialize(v1::PushResponse());
}

grpc::ServerUnaryReactor* NoopPsService::Pull(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* /*request*/,
                                              grpc::ByteBuffer* response) {
  *response = pull_response_;  // a reference to the same slices, not a copy of the bytes
  return Finish(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* NoopPsService::Push(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* /*request*/,
                                              grpc::ByteBuffer* response) {
  *response = push_response_;
  return Finish(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* NoopPsService::CreateTable(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* /*request*/,
                                                     grpc::ByteBuffer* /*response*/) {
  return Finish(context, grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no-op server"));
}

grpc::ServerUnaryReactor* NoopPsService::GetShardInfo(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* /*request*/,
                                                      grpc::ByteBuffer* /*response*/) {
  return Finish(context, grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no-op server"));
}

}  // namespace ember::bench
