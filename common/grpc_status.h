// Copyright 2026 The Ember Authors.
//
// The one place where absl::Status and grpc::Status are translated (STYLE.md habit 2),
// and the WrongShard redirect detail that rides on FAILED_PRECONDITION.
//
// Inside the process a routing error is an absl::Status with code FAILED_PRECONDITION
// and a payload (type URL kWrongShardTypeUrl) holding a serialized v1::WrongShard. On
// the wire the payload travels as the binary trailing metadata entry
// kWrongShardMetadataKey ("ember-wrong-shard-bin"); the status message is kept.
//
//   // server
//   reactor->Finish(ToGrpcStatus(WrongShardError(slot, owner, epoch), context));
//   // client
//   absl::Status s = FromGrpcStatus(stub->Pull(&ctx, req, &resp), &ctx);
//   if (std::optional<v1::WrongShard> w = GetWrongShard(s)) RefreshMap(w->epoch());

#ifndef EMBER_COMMON_GRPC_STATUS_H_
#define EMBER_COMMON_GRPC_STATUS_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ember/v1/ps.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace ember {

inline constexpr char kWrongShardMetadataKey[] = "ember-wrong-shard-bin";
inline constexpr char kWrongShardTypeUrl[] = "type.googleapis.com/ember.v1.WrongShard";
// The retry hint of an overloaded server (RESOURCE_EXHAUSTED): on the wire the ASCII
// trailing metadata entry "ember-retry-after-ms: N", inside the process a payload.
inline constexpr char kRetryAfterMetadataKey[] = "ember-retry-after-ms";
inline constexpr char kRetryAfterTypeUrl[] = "type.googleapis.com/ember.RetryAfterMs";

// FAILED_PRECONDITION naming `slot`, its `owner` and the shard's current `epoch`, with
// the WrongShard payload attached.
absl::Status WrongShardError(uint32_t slot, uint32_t owner, uint64_t epoch, absl::string_view why);

// The WrongShard payload of `status`, or nullopt when it has none (or it is corrupt).
std::optional<v1::WrongShard> GetWrongShard(const absl::Status& status);

// RESOURCE_EXHAUSTED with `message` and the hint "retry after `retry_after`" attached:
// a bound that a later attempt may pass (calls in flight), not a request that can never
// succeed (a message over --max_message_mb has no hint).
absl::Status OverloadedError(absl::string_view message, absl::Duration retry_after);

// The retry hint of `status`, or nullopt when it has none (or it is corrupt).
std::optional<absl::Duration> GetRetryAfter(const absl::Status& status);

// Server side: the grpc::Status for `status` (same code and message, the message
// clipped to kMaxStatusMessageBytes by ClipForMessage, common/clip.h). When `context`
// is not null, a WrongShard payload and a retry hint are added to its trailing metadata.
grpc::Status ToGrpcStatus(const absl::Status& status, grpc::ServerContextBase* context);

// Client side: the absl::Status for `status` (same code and message). When `context`
// is not null, WrongShard and retry-hint trailing metadata become payloads again.
// REQUIRES: the call on `context` has finished.
absl::Status FromGrpcStatus(const grpc::Status& status, const grpc::ClientContext* context);

}  // namespace ember

#endif  // EMBER_COMMON_GRPC_STATUS_H_
