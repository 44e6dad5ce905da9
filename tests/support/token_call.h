// Copyright 2026 The Ember Authors.
//
// What the security tests (tests/cluster/security_test.cc, cluster_token_test.cc) send:
// one unary call with a deadline and, optionally, a credential in its metadata, and a
// small table to create and a check that the coordinator has a table.
//
//   absl::Status s = CallWithToken(
//       [&](grpc::ClientContext* ctx) { return stub->KvPut(ctx, request, &response); },
//       absl::Seconds(5), kClusterTokenMetadataKey, token);

#ifndef EMBER_TESTS_SUPPORT_TOKEN_CALL_H_
#define EMBER_TESTS_SUPPORT_TOKEN_CALL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/table.pb.h"
#include "grpcpp/client_context.h"
#include "tests/support/deadline.h"

namespace ember {

// Runs `rpc` (a callable taking the ClientContext and returning grpc::Status) with a
// deadline `timeout` from now and, when `token` is not empty, metadata `key`=`token`.
template <typename Rpc>
absl::Status CallWithToken(Rpc rpc, absl::Duration timeout, const char* key,
                           const std::string& token) {
  grpc::ClientContext context;
  SetDeadline(&context, timeout);
  if (!token.empty()) context.AddMetadata(key, token);
  return FromGrpcStatus(rpc(&context), &context);
}

// Whether the coordinator behind `stub` describes table `name` (a 5 s deadline).
inline bool CoordinatorHasTable(v1::CoordinatorService::Stub& stub, const std::string& name) {
  v1::DescribeTableRequest request;
  request.set_name(name);
  v1::DescribeTableResponse response;
  return CallWithToken(
             [&](grpc::ClientContext* ctx) { return stub.DescribeTable(ctx, request, &response); },
             absl::Seconds(5), "", "")
      .ok();
}

// A table of dim 4 under SGD (learning rate 0.5).
inline v1::TableConfig SmallSgdTable(const std::string& name) {
  v1::TableConfig config;
  config.set_name(name);
  config.set_dim(4);
  config.mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
  config.mutable_optimizer()->set_learning_rate(0.5f);
  return config;
}

}  // namespace ember

#endif  // EMBER_TESTS_SUPPORT_TOKEN_CALL_H_
