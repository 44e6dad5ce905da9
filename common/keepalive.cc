// Copyright 2026 The Ember Authors.

#include "common/keepalive.h"

#include "grpc/grpc.h"

namespace ember {
namespace {

// The server side: a client's pings may come as often as every half keepalive time
// without counting as abuse; its own pings to clients, once a minute.
constexpr int kMinReceivedPingIntervalMs = kKeepaliveTimeMs / 2;
constexpr int kServerKeepaliveTimeMs = 60000;
constexpr int kServerKeepaliveTimeoutMs = 20000;

}  // namespace

void SetClientKeepalive(grpc::ChannelArguments* args) {
  args->SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  args->SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  // Only while calls are in flight: an idle channel needs no pings.
  args->SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  // A call that waits for its answer sends no data: without these two, gRPC stops
  // pinging after two pings without data, or spaces them 5 minutes apart.
  args->SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args->SetInt(GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS, kKeepaliveTimeMs);
}

void SetServerKeepalive(grpc::ServerBuilder* builder) {
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                              kMinReceivedPingIntervalMs);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kServerKeepaliveTimeMs);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kServerKeepaliveTimeoutMs);
}

}  // namespace ember
