// Copyright 2026 The Ember Authors.

#include "common/cluster_token.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/tls.h"
#include "grpcpp/create_channel.h"

namespace ember {
namespace {

// What a refused caller should set, by binary.
constexpr char kHowToSend[] =
    "--cluster_token_file of ember-ps and ember-worker, $EMBER_CLUSTER_TOKEN_FILE of the "
    "Python client";

}  // namespace

void DeclareClusterTokenFlags(FlagSet& flags, absl::string_view help, ClusterTokenFlags* out) {
  flags.String("cluster_token", &out->token, "TOKEN", help);
  flags.String("cluster_token_file", &out->token_file, "FILE",
               "read the cluster token from FILE (surrounding whitespace dropped)");
}

absl::StatusOr<std::string> LoadClusterToken(const ClusterTokenFlags& flags, bool tls) {
  if (!flags.token.empty() && !flags.token_file.empty()) {
    return absl::InvalidArgumentError("give --cluster_token or --cluster_token_file, not both");
  }
  std::string token = flags.token;
  if (!flags.token_file.empty()) {
    absl::StatusOr<std::string> read = ReadAdminTokenFile(flags.token_file);
    if (!read.ok()) {
      // The reader names the file as an admin token's; this one is not.
      return absl::InvalidArgumentError(absl::StrCat(
          "--cluster_token_file: ",
          absl::StrReplaceAll(read.status().message(), {{"admin token file", "file"}})));
    }
    token = *std::move(read);
  }
  if (!token.empty() && tls) {
    return absl::InvalidArgumentError(
        "--cluster_token(_file) is for plaintext clusters: with --tls_* the certificates "
        "decide (docs/SECURITY.md)");
  }
  return token;
}

absl::Status AuthorizeMember(const grpc::ServerContextBase& context, const std::string& token,
                             const AdminPolicy& admin, absl::string_view method, std::string* who) {
  if (token.empty()) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kClusterTokenMetadataKey);
  if (it != metadata.end() &&
      ConstantTimeEquals(absl::string_view(it->second.data(), it->second.size()), token)) {
    *who = absl::StrCat("peer=", context.peer(), " cluster_token=", TokenId(token));
    return absl::OkStatus();
  }
  // An operator (emberctl, scripts) may hold the admin token instead.
  if (admin.enabled() && metadata.find(kAdminTokenMetadataKey) != metadata.end() &&
      AuthorizeAdmin(context, admin, who).ok()) {
    return absl::OkStatus();
  }
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(
        absl::StrCat(method, " changes the cluster and needs its cluster token (metadata ",
                     kClusterTokenMetadataKey, ": ", kHowToSend, "); the call carries none"));
  }
  return absl::PermissionDeniedError(
      absl::StrCat(method, " carries a wrong cluster token (metadata ", kClusterTokenMetadataKey,
                   "): check ", kHowToSend, " against the coordinator's --cluster_token_file"));
}

std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
ClusterTokenInterceptors(const std::string& token) {
  return MetadataInterceptors(kClusterTokenMetadataKey, token);
}

std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
AdminAndClusterTokenInterceptors(const std::string& admin_token, const std::string& cluster_token) {
  auto out = AdminTokenInterceptors(admin_token);
  for (auto& factory : ClusterTokenInterceptors(cluster_token)) out.push_back(std::move(factory));
  return out;
}

std::shared_ptr<grpc::Channel> CreateClusterChannel(
    const std::string& address, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const std::string& token, const grpc::ChannelArguments& args) {
  if (token.empty()) return grpc::CreateCustomChannel(address, OrInsecure(credentials), args);
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, OrInsecure(credentials), args, ClusterTokenInterceptors(token));
}

}  // namespace ember
