// Copyright 2026 The Ember Authors.

#include "worker/collective/coordinator_store.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "grpcpp/client_context.h"

namespace ember::worker {
namespace {

// A stored value is a head key holding a 4-byte little-endian part count n >= 1 and part
// 0, plus parts 1..n-1 under "<key>/part/<i>". Parts are written before the head.
constexpr size_t kHeaderBytes = 4;
constexpr size_t kPartBytes = CoordinatorStore::kMaxValueBytes - kHeaderBytes;
// KvGet caps wait_ms at 60 s; the margin lets the NOT_FOUND answer arrive before the
// call's own deadline.
constexpr int64_t kMaxWaitMs = 60000;
constexpr int64_t kWaitMarginMs = 50;
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(20);
constexpr absl::Duration kMaxBackoff = absl::Milliseconds(500);

std::string PartKey(const std::string& full_key, uint32_t part) {
  return absl::StrCat(full_key, "/part/", part);
}

}  // namespace

CoordinatorStore::CoordinatorStore(std::shared_ptr<grpc::Channel> channel, std::string address,
                                   std::string prefix, absl::Time deadline)
    : stub_(v1::CoordinatorService::NewStub(std::move(channel))),
      address_(std::move(address)),
      prefix_(std::move(prefix)),
      deadline_(deadline) {}

absl::Status CoordinatorStore::Put(const std::string& full_key, std::string value) {
  absl::Duration backoff = kFirstBackoff;
  absl::Status last;
  while (absl::Now() < deadline_) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline_));
    v1::KvPutRequest request;
    request.set_key(full_key);
    request.set_value(value);
    v1::KvPutResponse response;
    const absl::Status s = FromGrpcStatus(stub_->KvPut(&context, request, &response), &context);
    if (s.ok()) return s;
    if (s.code() != absl::StatusCode::kUnavailable &&
        s.code() != absl::StatusCode::kDeadlineExceeded) {
      return absl::Status(
          s.code(), absl::StrCat("coordinator ", address_, " KvPut ", full_key, ": ", s.message()));
    }
    last = s;
    if (s.code() == absl::StatusCode::kUnavailable) {
      absl::SleepFor(std::min(backoff, deadline_ - absl::Now()));  // retry backoff
      backoff = std::min(2 * backoff, kMaxBackoff);
    }
  }
  if (last.code() == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(
        absl::StrCat("coordinator ", address_, " unreachable: ", last.message()));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("deadline passed storing rendezvous key ", full_key));
}

absl::StatusOr<std::string> CoordinatorStore::Fetch(const std::string& full_key,
                                                    absl::Time deadline, bool wait) {
  absl::Duration backoff = kFirstBackoff;
  absl::Status last;
  while (true) {
    const absl::Duration remaining = deadline - absl::Now();
    if (remaining <= absl::ZeroDuration()) break;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    v1::KvGetRequest request;
    request.set_key(full_key);
    if (wait) {
      request.set_wait_ms(static_cast<uint32_t>(std::clamp<int64_t>(
          absl::ToInt64Milliseconds(remaining) - kWaitMarginMs, 1, kMaxWaitMs)));
    }
    v1::KvGetResponse response;
    const absl::Status s = FromGrpcStatus(stub_->KvGet(&context, request, &response), &context);
    if (s.ok()) return std::move(*response.mutable_value());
    switch (s.code()) {
      case absl::StatusCode::kNotFound:
        if (!wait) return s;
        last = s;
        break;
      case absl::StatusCode::kUnavailable:  // not reachable yet, or shutting down
        last = s;
        absl::SleepFor(std::min(backoff, deadline - absl::Now()));  // retry backoff
        backoff = std::min(2 * backoff, kMaxBackoff);
        break;
      case absl::StatusCode::kDeadlineExceeded:
        last = s;
        break;
      default:
        return absl::Status(s.code(), absl::StrCat("coordinator ", address_, " KvGet ", full_key,
                                                   ": ", s.message()));
    }
  }
  if (last.code() == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(
        absl::StrCat("coordinator ", address_, " unreachable: ", last.message()));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("rendezvous key ", full_key, " did not appear before the deadline"));
}

absl::Status CoordinatorStore::Set(const std::string& key, absl::string_view value) {
  const std::string full_key = prefix_ + key;
  const uint32_t parts =
      value.empty() ? 1 : static_cast<uint32_t>((value.size() + kPartBytes - 1) / kPartBytes);
  for (uint32_t i = 1; i < parts; ++i) {
    EMBER_RETURN_IF_ERROR(
        Put(PartKey(full_key, i), std::string(value.substr(i * kPartBytes, kPartBytes))));
  }
  std::string head(kHeaderBytes, '\0');
  for (size_t b = 0; b < kHeaderBytes; ++b) head[b] = static_cast<char>((parts >> (8 * b)) & 0xff);
  const absl::string_view first = value.substr(0, kPartBytes);
  head.append(first.data(), first.size());
  return Put(full_key, std::move(head));
}

absl::StatusOr<std::string> CoordinatorStore::Get(const std::string& key, absl::Time deadline) {
  const std::string full_key = prefix_ + key;
  deadline = std::min(deadline, deadline_);
  EMBER_ASSIGN_OR_RETURN(std::string head, Fetch(full_key, deadline, /*wait=*/true));
  if (head.size() < kHeaderBytes) {
    return absl::InternalError(
        absl::StrCat("rendezvous key ", full_key, " is corrupt (", head.size(), " bytes)"));
  }
  uint32_t parts = 0;
  for (size_t b = 0; b < kHeaderBytes; ++b) {
    parts |= static_cast<uint32_t>(static_cast<unsigned char>(head[b])) << (8 * b);
  }
  if (parts == 0) {
    return absl::InternalError(absl::StrCat("rendezvous key ", full_key, " has 0 parts"));
  }
  std::string value = head.substr(kHeaderBytes);
  for (uint32_t i = 1; i < parts; ++i) {
    EMBER_ASSIGN_OR_RETURN(std::string part, Fetch(PartKey(full_key, i), deadline, /*wait=*/true));
    value.append(part);
  }
  return value;
}

absl::StatusOr<bool> CoordinatorStore::Contains(const std::string& key, absl::Time deadline) {
  absl::StatusOr<std::string> head = Fetch(prefix_ + key, deadline, /*wait=*/false);
  if (head.ok()) return true;
  if (head.status().code() == absl::StatusCode::kNotFound) return false;
  return head.status();
}

void CoordinatorStore::set(const std::string& key, const std::vector<char>& data) {
  const absl::Status s = Set(key, absl::string_view(data.data(), data.size()));
  if (!s.ok()) throw StoreError(s);
}

std::vector<char> CoordinatorStore::get(const std::string& key) {
  auto it = fetched_.find(key);
  if (it == fetched_.end()) {
    absl::StatusOr<std::string> value = Get(key, deadline_);
    if (!value.ok()) throw StoreError(value.status());
    return std::vector<char>(value->begin(), value->end());
  }
  std::vector<char> out(it->second.begin(), it->second.end());
  fetched_.erase(it);
  return out;
}

void CoordinatorStore::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds::max());
}

void CoordinatorStore::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  const absl::Duration limit = timeout == std::chrono::milliseconds::max()
                                   ? absl::InfiniteDuration()
                                   : absl::FromChrono(timeout);
  const absl::Time deadline = std::min(deadline_, absl::Now() + limit);
  for (const std::string& key : keys) {
    if (fetched_.count(key) > 0) continue;
    absl::StatusOr<std::string> value = Get(key, deadline);
    if (!value.ok()) throw StoreError(value.status());
    fetched_[key] = *std::move(value);
  }
}

}  // namespace ember::worker
