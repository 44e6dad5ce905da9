// Copyright 2026 The Ember Authors.

#include "common/grpc_status.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/clip.h"

namespace ember {
namespace {

// absl::StatusCode and grpc::StatusCode share the canonical numbering 0..16.
constexpr int kMaxCanonicalCode = 16;

}  // namespace

absl::Status WrongShardError(uint32_t slot, uint32_t owner, uint64_t epoch, absl::string_view why) {
  v1::WrongShard detail;
  detail.set_slot(slot);
  detail.set_owner(owner);
  detail.set_epoch(epoch);
  absl::Status status = absl::FailedPreconditionError(
      absl::StrCat("wrong shard: ", why, " (slot ", slot, " owner ", owner, " epoch ", epoch, ")"));
  status.SetPayload(kWrongShardTypeUrl, absl::Cord(detail.SerializeAsString()));
  return status;
}

std::optional<v1::WrongShard> GetWrongShard(const absl::Status& status) {
  auto payload = status.GetPayload(kWrongShardTypeUrl);
  if (!payload.has_value()) return std::nullopt;
  v1::WrongShard detail;
  if (!detail.ParseFromString(std::string(*payload))) return std::nullopt;
  return detail;
}

absl::Status OverloadedError(absl::string_view message, absl::Duration retry_after) {
  absl::Status status = absl::ResourceExhaustedError(message);
  status.SetPayload(
      kRetryAfterTypeUrl,
      absl::Cord(absl::StrCat(std::max<int64_t>(0, absl::ToInt64Milliseconds(retry_after)))));
  return status;
}

std::optional<absl::Duration> GetRetryAfter(const absl::Status& status) {
  auto payload = status.GetPayload(kRetryAfterTypeUrl);
  if (!payload.has_value()) return std::nullopt;
  int64_t ms = 0;
  if (!absl::SimpleAtoi(std::string(*payload), &ms) || ms < 0) return std::nullopt;
  return absl::Milliseconds(ms);
}

grpc::Status ToGrpcStatus(const absl::Status& status, grpc::ServerContextBase* context) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  const grpc::StatusCode grpc_code = code > 0 && code <= kMaxCanonicalCode
                                         ? static_cast<grpc::StatusCode>(code)
                                         : grpc::StatusCode::UNKNOWN;
  if (context != nullptr) {
    if (auto payload = status.GetPayload(kWrongShardTypeUrl)) {
      context->AddTrailingMetadata(kWrongShardMetadataKey, std::string(*payload));
    }
    if (auto payload = status.GetPayload(kRetryAfterTypeUrl)) {
      context->AddTrailingMetadata(kRetryAfterMetadataKey, std::string(*payload));
    }
  }
  // Clipped: a message that quotes a huge client string must not become a trailer the
  // client cannot receive (common/clip.h).
  return grpc::Status(grpc_code, ClipForMessage(status.message(), kMaxStatusMessageBytes));
}

absl::Status FromGrpcStatus(const grpc::Status& status, const grpc::ClientContext* context) {
  if (status.ok()) return absl::OkStatus();
  const int code = static_cast<int>(status.error_code());
  const absl::StatusCode absl_code = code > 0 && code <= kMaxCanonicalCode
                                         ? static_cast<absl::StatusCode>(code)
                                         : absl::StatusCode::kUnknown;
  absl::Status out(absl_code, status.error_message());
  if (context != nullptr) {
    const auto& trailers = context->GetServerTrailingMetadata();
    auto it = trailers.find(kWrongShardMetadataKey);
    if (it != trailers.end()) {
      out.SetPayload(kWrongShardTypeUrl,
                     absl::Cord(absl::string_view(it->second.data(), it->second.size())));
    }
    it = trailers.find(kRetryAfterMetadataKey);
    if (it != trailers.end()) {
      out.SetPayload(kRetryAfterTypeUrl,
                     absl::Cord(absl::string_view(it->second.data(), it->second.size())));
    }
  }
  return out;
}

}  // namespace ember
