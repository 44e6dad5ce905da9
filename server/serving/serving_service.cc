// Copyright 2026 The Ember Authors.

#include "server/serving/serving_service.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/admin_auth.h"
#include "common/float16.h"
#include "common/grpc_status.h"
#include "common/metric_families.h"

namespace ember {
namespace {

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

}  // namespace

ServingServiceImpl::ServingServiceImpl(Follower* follower, RpcMetrics* metrics, AdminPolicy admin)
    : follower_(follower), metrics_(metrics), admin_(std::move(admin)) {}

grpc::Status ServingServiceImpl::Finish(const char* method, int64_t start_micros,
                                        const absl::Status& status) {
  if (metrics_ != nullptr)
    metrics_->Method(method).Record(status.code(), NowMicros() - start_micros);
  return ToGrpcStatus(status, nullptr);
}

absl::Status ServingServiceImpl::DoLookup(const v1::LookupRequest& request, bool has_deadline,
                                          bool deadline_passed, v1::LookupResponse* response) {
  if (!has_deadline) {
    return absl::InvalidArgumentError(
        "Lookup needs a deadline: set one on the call (serving must not wait unbounded)");
  }
  if (request.table().empty()) return absl::InvalidArgumentError("Lookup needs a table");
  if (request.ids().empty()) return absl::InvalidArgumentError("Lookup needs at least one id");
  if (request.ids().size() % sizeof(uint64_t) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("Lookup ids: ", request.ids().size(),
                                                   " bytes is not a whole number of uint64"));
  }
  const size_t n = request.ids().size() / sizeof(uint64_t);
  const uint32_t max_keys = follower_->options().max_batch_keys;
  if (n > max_keys) {
    return absl::InvalidArgumentError(
        absl::StrCat("Lookup of ", n, " ids; the most is ", max_keys, " (--max_batch_keys)"));
  }
  if (request.encoding() != v1::VALUE_ENCODING_FLOAT32 &&
      request.encoding() != v1::VALUE_ENCODING_FLOAT16) {
    return absl::InvalidArgumentError(
        absl::StrCat("Lookup: unknown value encoding ", static_cast<int>(request.encoding())));
  }
  if (deadline_passed) return absl::DeadlineExceededError("Lookup: the deadline passed");
  std::vector<uint64_t> ids(n);
  std::memcpy(ids.data(), request.ids().data(), request.ids().size());
  std::vector<float> out;
  absl::StatusOr<uint32_t> unknown =
      follower_->Lookup(request.table(), ids, &out, response->mutable_version());
  if (!unknown.ok()) return unknown.status();
  response->set_unknown_ids(*unknown);
  std::string* values = response->mutable_values();
  if (request.encoding() == v1::VALUE_ENCODING_FLOAT16) {
    AppendFloat16Bytes(out, values);
  } else {
    AppendFloat32Bytes(out, values);
  }
  return absl::OkStatus();
}

grpc::Status ServingServiceImpl::Lookup(grpc::ServerContext* context,
                                        const v1::LookupRequest* request,
                                        v1::LookupResponse* response) {
  const int64_t start = NowMicros();
  const auto deadline = context->deadline();
  const bool has_deadline = deadline != std::chrono::system_clock::time_point::max();
  const bool passed = has_deadline && deadline <= std::chrono::system_clock::now();
  absl::Status status = DoLookup(*request, has_deadline, passed, response);
  if (status.ok() && context->IsCancelled()) {
    status = absl::DeadlineExceededError("Lookup: the deadline passed");
  }
  return Finish("Lookup", start, status);
}

grpc::Status ServingServiceImpl::Predict(grpc::ServerContext* context,
                                         const v1::PredictRequest* request,
                                         v1::PredictResponse* response) {
  const int64_t start = NowMicros();
  const auto deadline = context->deadline();
  absl::Status status;
  if (deadline == std::chrono::system_clock::time_point::max()) {
    status = absl::InvalidArgumentError(
        "Predict needs a deadline: set one on the call (serving must not wait unbounded)");
  } else if (deadline <= std::chrono::system_clock::now()) {
    status = absl::DeadlineExceededError("Predict: the deadline passed");
  } else {
    status = follower_->Predict(*request, response);
    if (status.ok() && context->IsCancelled()) {
      status = absl::DeadlineExceededError("Predict: the deadline passed");
    }
  }
  return Finish("Predict", start, status);
}

grpc::Status ServingServiceImpl::GetServingStatus(grpc::ServerContext* /*context*/,
                                                  const v1::GetServingStatusRequest* /*request*/,
                                                  v1::ServingStatus* response) {
  const int64_t start = NowMicros();
  *response = follower_->Status();
  return Finish("GetServingStatus", start, absl::OkStatus());
}

grpc::Status ServingServiceImpl::ListModelVersions(grpc::ServerContext* /*context*/,
                                                   const v1::ListModelVersionsRequest* /*request*/,
                                                   v1::ListModelVersionsResponse* response) {
  const int64_t start = NowMicros();
  absl::StatusOr<v1::ListModelVersionsResponse> versions = follower_->ListVersions();
  if (versions.ok()) *response = std::move(*versions);
  return Finish("ListModelVersions", start, versions.status());
}

grpc::Status ServingServiceImpl::PinModelVersion(grpc::ServerContext* context,
                                                 const v1::PinModelVersionRequest* request,
                                                 v1::PinModelVersionResponse* response) {
  const int64_t start = NowMicros();
  absl::Status status = absl::OkStatus();
  std::string who;
  if (admin_.enabled()) status = AuthorizeAdmin(*context, admin_, &who);
  if (status.ok()) {
    absl::StatusOr<v1::ModelVersion> version = follower_->Pin(request->checkpoint());
    if (version.ok()) *response->mutable_current() = std::move(*version);
    status = version.status();
  }
  return Finish("PinModelVersion", start, status);
}

grpc::Status ServingServiceImpl::GetDenseParameters(
    grpc::ServerContext* /*context*/, const v1::GetDenseParametersRequest* /*request*/,
    v1::GetDenseParametersResponse* response) {
  const int64_t start = NowMicros();
  absl::StatusOr<v1::GetDenseParametersResponse> dense = follower_->DenseParameters();
  if (dense.ok()) *response = std::move(*dense);
  return Finish("GetDenseParameters", start, dense.status());
}

grpc::Status ServingServiceImpl::Checksum(grpc::ServerContext* /*context*/,
                                          const v1::ChecksumRequest* request,
                                          v1::ChecksumResponse* response) {
  const int64_t start = NowMicros();
  absl::StatusOr<v1::ChecksumResponse> sums = follower_->Checksum(request->table());
  if (sums.ok()) *response = std::move(*sums);
  return Finish("Checksum", start, sums.status());
}

std::vector<prometheus::MetricFamily> FollowerCollector::Collect() const {
  const v1::ServingStatus status = follower_->Status();
  std::vector<prometheus::MetricFamily> out;
  FamilyWriter w(&out);
  using Samples = std::vector<std::pair<std::string, double>>;
  Samples lag_versions, lag_seconds, applied, connected, rows, tombstones, reconnects, held;
  for (const v1::ShardFollowState& s : status.shards()) {
    const std::string shard = absl::StrCat(s.shard_id());
    lag_versions.emplace_back(shard, static_cast<double>(s.lag_versions()));
    lag_seconds.emplace_back(shard, s.lag_seconds());
    applied.emplace_back(shard, static_cast<double>(s.applied_version()));
    connected.emplace_back(shard, s.connected() ? 1 : 0);
    rows.emplace_back(shard, static_cast<double>(s.rows_applied()));
    tombstones.emplace_back(shard, static_cast<double>(s.tombstones_applied()));
    reconnects.emplace_back(shard, static_cast<double>(s.reconnects()));
    held.emplace_back(shard, s.held_for_staleness() ? 1 : 0);
  }
  using prometheus::MetricType;
  w.Labelled("ember_serving_lag_versions",
             "Versions the shard has committed and the follower not applied yet.",
             MetricType::Gauge, "shard", lag_versions);
  w.Labelled("ember_serving_lag_seconds",
             "Estimated age of the oldest change not applied yet (0 when caught up).",
             MetricType::Gauge, "shard", lag_seconds);
  w.Labelled("ember_serving_applied_version", "The follower's position on the shard's stream.",
             MetricType::Gauge, "shard", applied);
  w.Labelled("ember_serving_connected", "1 while the shard's update stream is open.",
             MetricType::Gauge, "shard", connected);
  w.Labelled("ember_serving_rows_applied_total", "Rows applied from the shard's stream.",
             MetricType::Counter, "shard", rows);
  w.Labelled("ember_serving_tombstones_applied_total",
             "Row removals applied from the shard's stream.", MetricType::Counter, "shard",
             tombstones);
  w.Labelled("ember_serving_reconnects_total", "Times the shard's stream ended and was reopened.",
             MetricType::Counter, "shard", reconnects);
  w.Labelled("ember_serving_held_for_staleness",
             "1 while the shard's stream waits for a newer dense tower.", MetricType::Gauge,
             "shard", held);
  w.Counter("ember_serving_bootstraps_total", "Bootstraps from a checkpoint since the start.",
            static_cast<double>(status.bootstraps()));
  w.Gauge("ember_serving_ready", "1 once bootstrapped and following every shard.",
          status.ready() ? 1 : 0);
  w.Gauge("ember_serving_dense_step", "Training step of the served dense tower.",
          static_cast<double>(status.version().dense_step()));
  w.Gauge("ember_serving_sparse_step", "Newest training step among the applied rows.",
          static_cast<double>(status.version().sparse_step()));
  w.Counter("ember_serving_predict_rows_scored_total", "Rows Predict scored.",
            static_cast<double>(status.predict_rows_scored()));
  w.Counter("ember_serving_predict_rows_refused_total",
            "Rows Predict refused (bad rows, each named in its response).",
            static_cast<double>(status.predict_rows_refused()));
  w.Gauge("ember_serving_rows_in_memory", "Rows in the follower's memory tier.",
          static_cast<double>(status.rows_in_memory()));
  return out;
}

}  // namespace ember
