// Copyright 2026 The Ember Authors.

#include "server/ps/shard_drain.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/log.h"

namespace ember {

void DeclareDrainFlags(FlagSet& flags, DrainFlags* drain) {
  flags.Bool("drain_on_sigterm", &drain->on_sigterm,
             "at SIGTERM, keep serving while the coordinator moves every slot of this shard to "
             "the other shards (LeaveCluster), then shut down and exit 0; exit 1 if the "
             "coordinator refuses (the last shard holding slots) or --drain_timeout_ms "
             "passes. Needs --coordinator. Off: SIGTERM shuts down at once and the shard "
             "keeps its slots for a restart");
  flags
      .Number("drain_timeout_ms", &drain->timeout_ms, "N",
              "the longest drain at SIGTERM; keep it below the supervisor's grace period "
              "(Kubernetes terminationGracePeriodSeconds)")
      .Above(0);
  flags
      .Number("drain_linger_ms", &drain->linger_ms, "N",
              "once drained, keep answering this long (redirects to the new owners) before "
              "shutting down, so that clients with an older map are not left calling a "
              "shard that is gone")
      .Min(0);
}

absl::Status DrainShard(const DrainFlags& drain, ShardAgent* agent) {
  if (!drain.on_sigterm) return absl::OkStatus();
  if (agent == nullptr) {
    EMBER_LOG(WARNING) << "--drain_on_sigterm without --coordinator: nothing to drain";
    return absl::OkStatus();
  }
  if (agent->epoch() == 0) {
    // Stopped before the coordinator's first map arrived: the shard owns nothing.
    EMBER_LOG(INFO) << "draining: no slot map received yet, nothing to drain";
    return absl::OkStatus();
  }
  const absl::Time start = absl::Now();
  EMBER_LOG(INFO) << "draining: asking the coordinator to move this shard's slots away";
  const absl::Status left = agent->Leave(start + absl::Milliseconds(drain.timeout_ms));
  if (!left.ok()) {
    EMBER_LOG(ERROR) << "drain failed after " << absl::Now() - start << ": " << left
                     << "; shutting down with the slots it still owns (they are served "
                        "again when a shard restarts on this data directory)";
    return absl::Status(left.code(), absl::StrCat("drain at SIGTERM failed: ", left.message()));
  }
  EMBER_LOG(INFO) << "drained in " << absl::Now() - start << ": the shard owns no slots; "
                  << "answering redirects for " << drain.linger_ms << " ms before shutting down";
  absl::SleepFor(absl::Milliseconds(drain.linger_ms));
  return absl::OkStatus();
}

}  // namespace ember
