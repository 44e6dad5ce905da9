// Copyright 2026 The Ember Authors.
//
// The coordinator as a job test reads it while the job trains: shards' slot counts and
// the migrations (AdminService, with the coordinator's --admin_token).

#ifndef EMBER_TESTS_JOB_COORDINATOR_VIEW_H_
#define EMBER_TESTS_JOB_COORDINATOR_VIEW_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ember/v1/admin.grpc.pb.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/support/deadline.h"

namespace ember {

// The coordinator as the test reads it: shards' slot counts and migrations.
class CoordinatorView {
 public:
  // `token`: the coordinator's --admin_token.
  CoordinatorView(const std::string& address, std::string token)
      : token_(std::move(token)),
        channel_(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
        coordinator_(v1::CoordinatorService::NewStub(channel_)),
        admin_(v1::AdminService::NewStub(channel_)) {}

  // Slots per shard id (absent: not registered).
  std::map<uint32_t, uint32_t> OwnedSlots() {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::GetClusterMapResponse map;
    const grpc::Status s = coordinator_->GetClusterMap(&context, v1::GetClusterMapRequest(), &map);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::map<uint32_t, uint32_t> out;
    for (const v1::ShardInfo& shard : map.shards()) out[shard.shard_id()] = shard.owned_slots();
    return out;
  }

  // Every migration, oldest first.
  std::vector<v1::Migration> Migrations() {
    grpc::ClientContext context;
    context.AddMetadata("ember-admin-token", token_);
    SetDeadline(&context);
    v1::ListMigrationsResponse list;
    const grpc::Status s = admin_->ListMigrations(&context, v1::ListMigrationsRequest(), &list);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return std::vector<v1::Migration>(list.migrations().rbegin(), list.migrations().rend());
  }

  absl::StatusOr<v1::Migration> Start(const v1::MigrationSpec& spec) {
    grpc::ClientContext context;
    context.AddMetadata("ember-admin-token", token_);
    SetDeadline(&context);
    v1::StartMigrationRequest request;
    *request.mutable_spec() = spec;
    v1::Migration op;
    const grpc::Status s = admin_->StartMigration(&context, request, &op);
    if (!s.ok()) return absl::InternalError(s.error_message());
    return op;
  }

 private:
  const std::string token_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::CoordinatorService::Stub> coordinator_;
  std::unique_ptr<v1::AdminService::Stub> admin_;
};

}  // namespace ember

#endif  // EMBER_TESTS_JOB_COORDINATOR_VIEW_H_
