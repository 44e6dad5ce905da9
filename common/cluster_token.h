// Copyright 2026 The Ember Authors.
//
// The cluster token: the credential of a plaintext cluster's members (shards and
// workers). Without TLS nothing else tells a shard or a worker from a stranger who can
// reach a port, so a coordinator or shard started with --cluster_token_file requires
// it (metadata kClusterTokenMetadataKey) on every call that changes the cluster's
// shape or what workers trust: RegisterShard, Heartbeat, LeaveCluster, CreateTable
// (coordinator and shard) and KvPut. The admin credential (common/admin_auth.h) is
// accepted there too. With mutual TLS the certificates decide instead, and the flag is
// a usage error. docs/SECURITY.md says what stays open.
//
//   // Server side, in a handler:
//   if (absl::Status s = AuthorizeMember(*context, token, admin, "KvPut", &who); !s.ok()) ...
//   // Client side: every call of the channel carries the token.
//   auto channel = CreateClusterChannel(address, credentials, token);

#ifndef EMBER_COMMON_CLUSTER_TOKEN_H_
#define EMBER_COMMON_CLUSTER_TOKEN_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/admin_auth.h"
#include "common/flags.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"

namespace ember {

inline constexpr char kClusterTokenMetadataKey[] = "ember-cluster-token";

// --cluster_token=TOKEN (tests) or --cluster_token_file=FILE.
struct ClusterTokenFlags {
  std::string token;
  std::string token_file;
};

// Declares --cluster_token and --cluster_token_file; `help` says what the token does
// for this binary.
void DeclareClusterTokenFlags(FlagSet& flags, absl::string_view help, ClusterTokenFlags* out);

// The token the flags give ("" for none). INVALID_ARGUMENT naming the flag for both
// flags, an unreadable or empty file, or a token together with TLS (`tls`).
absl::StatusOr<std::string> LoadClusterToken(const ClusterTokenFlags& flags, bool tls);

// OK when `token` is empty (not required), or the call carries it, or an admin
// credential of `admin`; sets *who to the caller's audit name. Otherwise
// UNAUTHENTICATED (no token) or PERMISSION_DENIED (a wrong one), naming `method` and
// the flags to set, never the token.
absl::Status AuthorizeMember(const grpc::ServerContextBase& context, const std::string& token,
                             const AdminPolicy& admin, absl::string_view method, std::string* who);

// Client interceptors that add the cluster token to every call (none for "").
std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
ClusterTokenInterceptors(const std::string& token);

// Both tokens' interceptors (each left out when empty): what the coordinator sends to
// the shards and a shard to the coordinator.
std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
AdminAndClusterTokenInterceptors(const std::string& admin_token, const std::string& cluster_token);

// A channel to `address` with `credentials` (null: insecure) whose every call carries
// `token` (none when empty).
std::shared_ptr<grpc::Channel> CreateClusterChannel(
    const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const std::string& token, const grpc::ChannelArguments& args = grpc::ChannelArguments());

}  // namespace ember

#endif  // EMBER_COMMON_CLUSTER_TOKEN_H_
