// Copyright 2026 The Ember Authors.
//
// Draining a shard at SIGTERM (ember-ps --drain_on_sigterm): a shard asked to leave
// (a scale-down, a Kubernetes preStop) keeps serving while the coordinator moves its
// slots to the other shards (ShardAgent::Leave, CoordinatorService.LeaveCluster), and
// only then shuts down. Clients never see a failed call: the moves are ordinary online
// slot migrations (server/coordinator/slot_migrator.h), and the shard answers until it
// owns nothing.
//
//   DrainFlags drain;             // in the binary's options
//   DeclareDrainFlags(flags, &drain);
//   ...
//   hooks.draining = [&] { return DrainShard(drain, agent.get()); };  // serve.h

#ifndef EMBER_SERVER_PS_SHARD_DRAIN_H_
#define EMBER_SERVER_PS_SHARD_DRAIN_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/flags.h"
#include "server/ps/shard_agent.h"

namespace ember {

struct DrainFlags {
  // Drain at SIGTERM (--drain_on_sigterm). Default: false: a plain shutdown keeps the
  // shard's slots and rows for a restart on the same data directory (what the test
  // clusters and deploy/local do); deploy/k8s turns it on.
  bool on_sigterm = false;
  // The longest drain (--drain_timeout_ms); keep it below Kubernetes'
  // terminationGracePeriodSeconds. Default: 600000 (10 minutes)
  int64_t timeout_ms = 600000;
  // Once drained, how long the shard keeps answering before it shuts down
  // (--drain_linger_ms): a client whose map still names it for a moved slot gets a
  // redirect to the new owner (and reloads its map) instead of an unreachable shard,
  // which a push could only retry until its deadline (its sequence is deduplicated by
  // the shard it was sent to). Default: 500 (clients reload their map at most every
  // 100 ms; a training step asks every owner).
  int64_t linger_ms = 500;
};

// --drain_on_sigterm and --drain_timeout_ms.
void DeclareDrainFlags(FlagSet& flags, DrainFlags* drain);

// At SIGTERM: with drain.on_sigterm and an agent (the shard has a coordinator) that has
// applied a slot map, leaves the cluster (ShardAgent::Leave with the timeout) and logs
// how long it took. OK without draining, before any map (nothing owned) or once drained; otherwise
// Leave's error with what to do, which makes the process exit 1 after its ordinary shutdown (rows
// flushed, slots kept).
absl::Status DrainShard(const DrainFlags& drain, ShardAgent* agent);

}  // namespace ember

#endif  // EMBER_SERVER_PS_SHARD_DRAIN_H_
