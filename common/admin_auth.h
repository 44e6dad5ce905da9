// Copyright 2026 The Ember Authors.
//
// The admin credential on the wire: operator and control-plane calls carry the
// metadata entry kAdminTokenMetadataKey equal to the cluster's admin token. The
// coordinator's AdminService requires it (server/coordinator/admin_service.h); PS
// shards started with a token require it on the calls that change ownership or rows
// wholesale (slot migration, checkpoint and restore), which only the coordinator makes.
//
//   // Server side, in a handler:
//   if (absl::Status s = CheckAdminToken(context->client_metadata(), token); !s.ok()) ...
//   // Client side: every call of the channel carries the token.
//   auto channel = grpc::experimental::CreateCustomChannelWithInterceptors(
//       address, creds, args, AdminTokenInterceptors(token));

#ifndef EMBER_COMMON_ADMIN_AUTH_H_
#define EMBER_COMMON_ADMIN_AUTH_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/client_interceptor.h"
#include "grpcpp/support/string_ref.h"

namespace ember {

inline constexpr char kAdminTokenMetadataKey[] = "ember-admin-token";

// Compares without an early exit, so the time taken does not reveal a matching prefix.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// OK when `metadata` carries kAdminTokenMetadataKey equal to `token`;
// UNAUTHENTICATED (saying which) when it is missing or wrong, and when `token` is
// empty (nothing can match).
absl::Status CheckAdminToken(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
                             absl::string_view token);

// The token in `path` (surrounding whitespace dropped). INVALID_ARGUMENT naming the
// file when it cannot be read or holds only whitespace.
absl::StatusOr<std::string> ReadAdminTokenFile(const std::string& path);

// Client interceptors that add the token to every call of a channel (none for an
// empty token).
std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
AdminTokenInterceptors(const std::string& token);

}  // namespace ember

#endif  // EMBER_COMMON_ADMIN_AUTH_H_
