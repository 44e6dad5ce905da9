// Copyright 2026 The Ember Authors.
//
// ember-ps's bounds against a client that takes more than its share (issue 28 items
// 1.1, 1.3, 1.5): their flags, and how they reach the service and the gRPC server.
//
//  * Pulls in flight: calls and answer bytes (InflightLimiter; beyond them
//    RESOURCE_EXHAUSTED with the retry hint ember-retry-after-ms).
//  * Update streams: in all, per peer address, and a stall timeout (WatchSlots).
//  * Connections: idle connections closed after --max_connection_idle_ms, and the
//    listener probed every --listener_check_ms (server/shared/listener_check.h: a shard
//    whose listener died exits 75 to be restarted). The bounds on open connections, in
//    all and per client address, and the open-file limit are every server's
//    (server/shared/connection_gate.h, --max_connections, --max_connections_per_peer).
//
// What gRPC 1.51 cannot bound, and so Ember does not: the bytes of requests gRPC has
// received before a handler runs (--max_message_mb bounds each one).

#ifndef EMBER_SERVER_PS_SHARD_BOUNDS_H_
#define EMBER_SERVER_PS_SHARD_BOUNDS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "common/flags.h"
#include "grpcpp/server_builder.h"
#include "server/ps/inflight_limiter.h"
#include "server/ps/watch_slots.h"
#include "server/shared/listener_check.h"

namespace ember {

struct ShardBoundsFlags {
  int64_t max_inflight_calls = 1024;        // 0: no bound
  int64_t max_inflight_mb = -1;             // -1: InflightBytesFor(budget); 0: no bound
  int64_t max_connection_idle_ms = 300000;  // 0: never closed for idleness
  int64_t listener_check_ms = 5000;         // 0: no listener check
  int max_watches = 256;
  int max_watches_per_peer = 32;
  int64_t watch_stall_timeout_ms = 60000;
};

void DeclareShardBoundsFlags(FlagSet& flags, ShardBoundsFlags* bounds);

// The limiter's limits for a shard with `memory_budget_bytes` (0: unlimited); nullopt
// style: `enabled` false when both bounds are off.
InflightLimits InflightLimitsFrom(const ShardBoundsFlags& bounds, int64_t memory_budget_bytes,
                                  bool* enabled);
WatchLimits WatchLimitsFrom(const ShardBoundsFlags& bounds);

// Sets the connection arguments (idle timeout) on the server's builder.
void ApplyConnectionBounds(const ShardBoundsFlags& bounds, grpc::ServerBuilder* builder);

// With --listener_check_ms > 0, a ListenerCheck of host:port whose verdict "broken"
// logs why, notifies `broken` and sends this process SIGTERM (the server stops as on any
// stop signal; ember-ps then exits kExitRestartMe). Null without the check.
std::unique_ptr<ListenerCheck> StartListenerCheck(const ShardBoundsFlags& bounds,
                                                  const std::string& host, int port,
                                                  absl::Notification* broken);

}  // namespace ember

#endif  // EMBER_SERVER_PS_SHARD_BOUNDS_H_
