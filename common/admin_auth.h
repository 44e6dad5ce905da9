// Copyright 2026 The Ember Authors.
//
// The admin credential: an admin call carries the metadata entry kAdminTokenMetadataKey
// equal to the cluster's admin token, or comes over mutual TLS (common/tls.h) from a
// client certificate whose common name is one of the admin identities. The
// coordinator's AdminService requires one (server/coordinator/admin_service.h); PS
// shards given a policy require one on the calls that change ownership or rows
// wholesale (slot migration, checkpoint and restore, replica copies), which only the
// coordinator and other shards make. Workers hold neither: their calls are refused.
//
//   // Server side, in a handler:
//   std::string who;
//   if (absl::Status s = AuthorizeAdmin(*context, policy, &who); !s.ok()) ...
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
#include "common/flags.h"
#include "common/tls.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/client_interceptor.h"
#include "grpcpp/support/string_ref.h"

namespace ember {

inline constexpr char kAdminTokenMetadataKey[] = "ember-admin-token";

// Compares without an early exit, so the time taken does not reveal a matching prefix.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

// Who may call admin RPCs.
struct AdminPolicy {
  std::string token;                    // empty: no token is accepted
  std::vector<std::string> identities;  // certificate common names with the admin role

  bool enabled() const { return !token.empty() || !identities.empty(); }
};

// OK when the call carries the right token or comes from an admin certificate; sets
// *who to its audit name ("peer=ipv4:10.0.0.7:5123 cert=ember-admin" or
// "peer=... token=tok-1a2b3c4d"; never the token). Otherwise, and changing nothing:
// UNAUTHENTICATED for a wrong token or no credential at all, PERMISSION_DENIED for a
// verified certificate that is not an admin identity (a worker's) and carries no
// token. A policy that is not enabled accepts nothing (UNAUTHENTICATED).
absl::Status AuthorizeAdmin(const grpc::ServerContextBase& context, const AdminPolicy& policy,
                            std::string* who);

// A short, stable, non-secret name of `token` for audit entries: "tok-" + 8 hex digits
// of a 64-bit FNV-1a hash.
std::string TokenId(absl::string_view token);

// Splits --admin_identities=NAME1,NAME2 (empty names dropped).
std::vector<std::string> ParseIdentityList(absl::string_view text);

// The admin flags every server takes: --admin_token, --admin_token_file and
// --admin_identities=NAME1,NAME2 (certificate common names with the admin role).
struct AdminFlags {
  std::string token;
  std::string token_file;
  std::string identities;
};

// What a server's --help says of its admin flags.
struct AdminFlagsHelp {
  absl::string_view token;       // --admin_token
  absl::string_view identities;  // --admin_identities
};

// The policy the flags give: reads the token file. INVALID_ARGUMENT for both
// --admin_token and --admin_token_file, or an unreadable or empty file.
absl::StatusOr<AdminPolicy> LoadAdminPolicy(const AdminFlags& flags);

// The security flags every server takes: the admin flags, the --tls_* flags
// (common/tls.h) and --health_port (common/health.h).
struct ServerSecurityFlags {
  AdminFlags admin;
  TlsOptions tls;
  int32_t health_port = -1;  // -1: no probe port
};

// Declares the admin flags (with `help`), then the TLS flags and --health_port under
// a "Transport security and probes" heading, into *flags.
void DeclareServerSecurityFlags(FlagSet& flags, const AdminFlagsHelp& help,
                                ServerSecurityFlags* security);

// Checks the flags together and returns the admin policy. INVALID_ARGUMENT (a usage
// error) for a bad token file, unreadable or wrong TLS files, TLS without a token or
// identities (`risk` says what a worker's certificate could do then), or a health port
// outside [-1, 65535].
absl::StatusOr<AdminPolicy> CheckServerSecurityFlags(const ServerSecurityFlags& flags,
                                                     absl::string_view risk);

// The token in `path` (surrounding whitespace dropped). INVALID_ARGUMENT naming the
// file when it cannot be read or holds only whitespace.
absl::StatusOr<std::string> ReadAdminTokenFile(const std::string& path);

// Client interceptors that add the token to every call of a channel (none for an
// empty token).
std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
AdminTokenInterceptors(const std::string& token);

// Client interceptors that add metadata `key`=`value` to every call of a channel (none
// for an empty value): the admin token's and the cluster token's (common/cluster_token.h).
std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
MetadataInterceptors(const std::string& key, const std::string& value);

}  // namespace ember

#endif  // EMBER_COMMON_ADMIN_AUTH_H_
