// Copyright 2026 The Ember Authors.

#include "common/admin_auth.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/tls.h"

namespace ember {
namespace {

class AddToken : public grpc::experimental::Interceptor {
 public:
  AddToken(const std::string* key, const std::string* token) : key_(key), token_(token) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(*key_, *token_);
    }
    methods->Proceed();
  }

 private:
  // Owned by the factory, which outlives the channel's calls.
  const std::string* key_;
  const std::string* token_;
};

class AddTokenFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  AddTokenFactory(std::string key, std::string token)
      : key_(std::move(key)), token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new AddToken(&key_, &token_);
  }

 private:
  const std::string key_;
  const std::string token_;
};

}  // namespace

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

absl::Status AuthorizeAdmin(const grpc::ServerContextBase& context, const AdminPolicy& policy,
                            std::string* who) {
  const std::string common_name = PeerCommonName(context);
  const std::string peer = absl::StrCat("peer=", context.peer());
  if (!common_name.empty()) {
    for (const std::string& identity : policy.identities) {
      if (ConstantTimeEquals(identity, common_name)) {
        *who = absl::StrCat(peer, " cert=", common_name);
        return absl::OkStatus();
      }
    }
  }
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kAdminTokenMetadataKey);
  if (it != metadata.end()) {
    if (policy.token.empty())
      return absl::UnauthenticatedError("admin tokens are not accepted here");
    if (!ConstantTimeEquals(absl::string_view(it->second.data(), it->second.size()),
                            policy.token)) {
      return absl::UnauthenticatedError("wrong admin token");
    }
    *who = absl::StrCat(peer, common_name.empty() ? "" : " cert=", common_name,
                        " token=", TokenId(policy.token));
    return absl::OkStatus();
  }
  if (!common_name.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat("client certificate '", common_name,
                     "' is not an admin identity and the call carries no admin token"));
  }
  if (!policy.enabled()) return absl::UnauthenticatedError("admin calls are disabled here");
  return absl::UnauthenticatedError(absl::StrCat("admin call without a credential: send metadata ",
                                                 kAdminTokenMetadataKey,
                                                 " or use an admin client certificate"));
}

std::string TokenId(absl::string_view token) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : token) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 0x100000001b3ull;
  }
  return absl::StrFormat("tok-%08x", static_cast<uint32_t>(hash >> 32));
}

std::vector<std::string> ParseIdentityList(absl::string_view text) {
  std::vector<std::string> out;
  for (absl::string_view name : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(name));
  }
  return out;
}

absl::StatusOr<AdminPolicy> LoadAdminPolicy(const AdminFlags& flags) {
  AdminPolicy policy;
  if (!flags.token.empty() && !flags.token_file.empty()) {
    return absl::InvalidArgumentError("give --admin_token or --admin_token_file, not both");
  }
  policy.token = flags.token;
  if (!flags.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadAdminTokenFile(flags.token_file);
    if (!token.ok()) return token.status();
    policy.token = *std::move(token);
  }
  policy.identities = ParseIdentityList(flags.identities);
  return policy;
}

void DeclareServerSecurityFlags(FlagSet& flags, const AdminFlagsHelp& help,
                                ServerSecurityFlags* security) {
  flags.String("admin_token", &security->admin.token, "TOKEN", help.token);
  flags.String("admin_token_file", &security->admin.token_file, "FILE",
               "read the token from FILE (surrounding whitespace dropped)");
  flags.String("admin_identities", &security->admin.identities, "A,B", help.identities);
  DeclareTlsFlags(flags, &security->tls);
  flags
      .Number("health_port", &security->health_port, "N",
              "also serve the gRPC health service (alone, plaintext: for Kubernetes probes) on "
              "this port; 0 picks one, -1 none")
      .Range(-1, 65535);
}

absl::StatusOr<AdminPolicy> CheckServerSecurityFlags(const ServerSecurityFlags& flags,
                                                     absl::string_view risk) {
  absl::StatusOr<AdminPolicy> policy = LoadAdminPolicy(flags.admin);
  if (!policy.ok()) return policy.status();
  if (absl::Status s = TlsCredentials::Load(flags.tls).status(); !s.ok()) return s;
  if (flags.tls.enabled() && !policy->enabled()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "with --tls_* give --admin_token_file or --admin_identities: otherwise ", risk));
  }
  return policy;
}

absl::StatusOr<std::string> ReadAdminTokenFile(const std::string& path) {
  std::ifstream file(path);
  if (!file)
    return absl::InvalidArgumentError(absl::StrCat("cannot read admin token file '", path, "'"));
  std::stringstream text;
  text << file.rdbuf();
  std::string token(absl::StripAsciiWhitespace(text.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("admin token file '", path, "' is empty"));
  }
  return token;
}

std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
AdminTokenInterceptors(const std::string& token) {
  return MetadataInterceptors(kAdminTokenMetadataKey, token);
}

std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
MetadataInterceptors(const std::string& key, const std::string& value) {
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> out;
  if (!value.empty()) out.push_back(std::make_unique<AddTokenFactory>(key, value));
  return out;
}

}  // namespace ember
