// Copyright 2026 The Ember Authors.

#include "common/admin_auth.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace ember {
namespace {

class AddToken : public grpc::experimental::Interceptor {
 public:
  explicit AddToken(const std::string* token) : token_(token) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kAdminTokenMetadataKey, *token_);
    }
    methods->Proceed();
  }

 private:
  const std::string* token_;  // owned by the factory, which outlives the channel's calls
};

class AddTokenFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit AddTokenFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* info) override {
    return new AddToken(&token_);
  }

 private:
  const std::string token_;
};

}  // namespace

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

absl::Status CheckAdminToken(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
                             absl::string_view token) {
  if (token.empty()) return absl::UnauthenticatedError("no admin token is configured");
  auto it = metadata.find(kAdminTokenMetadataKey);
  if (it == metadata.end()) {
    return absl::UnauthenticatedError(absl::StrCat("missing metadata ", kAdminTokenMetadataKey));
  }
  if (!ConstantTimeEquals(absl::string_view(it->second.data(), it->second.size()), token)) {
    return absl::UnauthenticatedError("wrong admin token");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadAdminTokenFile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::InvalidArgumentError(absl::StrCat("cannot read admin token file '", path, "'"));
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
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> out;
  if (!token.empty()) out.push_back(std::make_unique<AddTokenFactory>(token));
  return out;
}

}  // namespace ember
