// Copyright 2026 The Ember Authors.
//
// ServingServiceImpl: the gRPC face of a Follower (proto/ember/v1/serving.proto), and
// FollowerCollector: its Prometheus metrics, read from the follower at scrape time.
//
//   ServingServiceImpl service(follower.get(), &rpc_metrics, AdminPolicy{token});
//   builder.RegisterService(&service);
//
// Lookup and Predict check their input before touching the store: an empty, oversized
// or malformed batch and a call without a deadline get INVALID_ARGUMENT; a deadline that passed
// gets DEADLINE_EXCEEDED. PinModelVersion changes what every client is served, so it
// needs the admin token (common/admin_auth.h) when one is configured.
//
// Thread-safety: all methods may be called concurrently.

#ifndef EMBER_SERVER_SERVING_SERVING_SERVICE_H_
#define EMBER_SERVER_SERVING_SERVING_SERVICE_H_

#include <string>
#include <vector>

#include "common/admin_auth.h"
#include "common/metrics.h"
#include "ember/v1/serving.grpc.pb.h"
#include "prometheus/collectable.h"
#include "server/serving/follower.h"

namespace ember {

class ServingServiceImpl final : public v1::ServingService::Service {
 public:
  // `follower` and `metrics` (may be null) are not owned and must outlive the service.
  // PinModelVersion needs an admin credential of `admin` when it is enabled.
  ServingServiceImpl(Follower* follower, RpcMetrics* metrics, AdminPolicy admin);

  grpc::Status Lookup(grpc::ServerContext* context, const v1::LookupRequest* request,
                      v1::LookupResponse* response) override;
  grpc::Status GetServingStatus(grpc::ServerContext* context,
                                const v1::GetServingStatusRequest* request,
                                v1::ServingStatus* response) override;
  grpc::Status ListModelVersions(grpc::ServerContext* context,
                                 const v1::ListModelVersionsRequest* request,
                                 v1::ListModelVersionsResponse* response) override;
  grpc::Status PinModelVersion(grpc::ServerContext* context,
                               const v1::PinModelVersionRequest* request,
                               v1::PinModelVersionResponse* response) override;
  grpc::Status GetDenseParameters(grpc::ServerContext* context,
                                  const v1::GetDenseParametersRequest* request,
                                  v1::GetDenseParametersResponse* response) override;
  grpc::Status Checksum(grpc::ServerContext* context, const v1::ChecksumRequest* request,
                        v1::ChecksumResponse* response) override;
  grpc::Status Predict(grpc::ServerContext* context, const v1::PredictRequest* request,
                       v1::PredictResponse* response) override;

  // Lookup without gRPC: `has_deadline` and `deadline_passed` as the call's context says.
  absl::Status DoLookup(const v1::LookupRequest& request, bool has_deadline, bool deadline_passed,
                        v1::LookupResponse* response);

 private:
  grpc::Status Finish(const char* method, int64_t start_micros, const absl::Status& status);

  Follower* const follower_;
  RpcMetrics* const metrics_;
  const AdminPolicy admin_;
};

// Per-shard lag and progress, model version and counters of a Follower.
class FollowerCollector final : public prometheus::Collectable {
 public:
  explicit FollowerCollector(const Follower* follower) : follower_(follower) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const Follower* const follower_;
};

}  // namespace ember

#endif  // EMBER_SERVER_SERVING_SERVING_SERVICE_H_
