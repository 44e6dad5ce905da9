// Copyright 2026 The Ember Authors.

#include "server/ps/shard_bounds.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "grpc/grpc.h"

namespace ember {

void DeclareShardBoundsFlags(FlagSet& flags, ShardBoundsFlags* b) {
  flags.Section("Bounds per shard (a client that takes more than its share):");
  flags
      .Number("max_inflight_calls", &b->max_inflight_calls, "N",
              "Pull calls in flight; more fail RESOURCE_EXHAUSTED with a retry hint "
              "(trailing metadata ember-retry-after-ms, which PsClient honours); 0 no bound")
      .Min(0);
  flags
      .Number("max_inflight_mb", &b->max_inflight_mb, "N",
              "MiB of Pull answers in flight (held until sent); more fail RESOURCE_EXHAUSTED "
              "with a retry hint; 0 no bound")
      .Min(-1)
      .DefaultText("--memory_budget_mb/4 within 64..1024");
  flags
      .Number("max_connection_idle_ms", &b->max_connection_idle_ms, "N",
              "close a client connection with no call for this long (GOAWAY); 0 never")
      .Min(0);
  flags
      .Number("listener_check_ms", &b->listener_check_ms, "N",
              "probe this shard's own port this often; after 3 failed probes in a row (the "
              "listener stopped accepting, e.g. after running out of file descriptors) exit "
              "75 so that the supervisor restarts the shard; 0 no check")
      .Min(0);
  flags
      .Number("max_watches", &b->max_watches, "N",
              "WatchUpdates streams open at once; more fail RESOURCE_EXHAUSTED")
      .Min(1);
  flags
      .Number("max_watches_per_peer", &b->max_watches_per_peer, "N",
              "WatchUpdates streams of one client address; more fail RESOURCE_EXHAUSTED")
      .Min(1);
  flags
      .Number("watch_stall_timeout_ms", &b->watch_stall_timeout_ms, "N",
              "close a WatchUpdates stream whose reader took nothing for this long")
      .Above(0);
}

InflightLimits InflightLimitsFrom(const ShardBoundsFlags& b, int64_t memory_budget_bytes,
                                  bool* enabled) {
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  InflightLimits limits;
  limits.max_calls = b.max_inflight_calls == 0 ? kNone : b.max_inflight_calls;
  limits.max_bytes = b.max_inflight_mb < 0    ? InflightBytesFor(memory_budget_bytes)
                     : b.max_inflight_mb == 0 ? kNone
                                              : b.max_inflight_mb << 20;
  *enabled = limits.max_calls != kNone || limits.max_bytes != kNone;
  return limits;
}

WatchLimits WatchLimitsFrom(const ShardBoundsFlags& b) {
  WatchLimits limits;
  limits.max_watches = b.max_watches;
  limits.max_per_peer = b.max_watches_per_peer;
  limits.stall_timeout = absl::Milliseconds(b.watch_stall_timeout_ms);
  return limits;
}

void ApplyConnectionBounds(const ShardBoundsFlags& b, grpc::ServerBuilder* builder) {
  if (b.max_connection_idle_ms > 0) {
    builder->AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                                static_cast<int>(std::min<int64_t>(
                                    b.max_connection_idle_ms, std::numeric_limits<int>::max())));
  }
}

std::unique_ptr<ListenerCheck> StartListenerCheck(const ShardBoundsFlags& bounds,
                                                  const std::string& host, int port,
                                                  absl::Notification* broken) {
  if (bounds.listener_check_ms <= 0) return nullptr;
  const absl::Duration interval = absl::Milliseconds(bounds.listener_check_ms);
  return std::make_unique<ListenerCheck>(
      ListenerCheckOptions{.host = host,
                           .port = port,
                           .interval = interval,
                           .timeout = std::max(interval, absl::Seconds(2))},
      [broken](const std::string& why) {
        EMBER_LOG(ERROR) << "the listener does not accept connections (" << why
                         << "): stopping, to exit " << kExitRestartMe << " and be restarted";
        broken->Notify();
        kill(getpid(), SIGTERM);  // the server's WaitForStopSignal takes it
      });
}

}  // namespace ember
