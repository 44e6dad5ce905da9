// Copyright 2026 The Ember Authors.

#include "common/tls.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/auth_context.h"

namespace ember {
namespace {

// Reads `path` (named by --`flag`) and checks that it holds a PEM block whose BEGIN
// line contains `kind`.
absl::StatusOr<std::string> ReadPem(absl::string_view flag, const std::string& path,
                                    absl::string_view kind) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read '", path, "'"));
  std::stringstream text;
  text << file.rdbuf();
  std::string pem = text.str();
  const size_t begin = pem.find("-----BEGIN ");
  const size_t end_of_line = begin == std::string::npos ? begin : pem.find("-----", begin + 11);
  if (begin == std::string::npos || end_of_line == std::string::npos ||
      !absl::StrContains(absl::string_view(pem).substr(begin, end_of_line - begin), kind)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": '", path, "' holds no PEM ", kind, " block"));
  }
  return pem;
}

}  // namespace

void DeclareTlsFlags(FlagSet& flags, TlsOptions* options) {
  flags.Section("Transport security:");
  flags.String("tls_ca", &options->ca_file, "FILE",
               "mutual TLS: the CA (PEM) that signs every peer's certificate. Give all three "
               "--tls_* flags or none (plaintext). tools/gen-certs.sh makes a test CA");
  flags.String("tls_cert", &options->cert_file, "FILE",
               "this process's certificate (PEM), signed by --tls_ca");
  flags.String("tls_key", &options->key_file, "FILE", "its private key (PEM)");
}

TlsCredentials::TlsCredentials()
    : server_(grpc::InsecureServerCredentials()), channel_(grpc::InsecureChannelCredentials()) {}

absl::StatusOr<TlsCredentials> TlsCredentials::Load(const TlsOptions& options) {
  TlsCredentials out;
  if (!options.enabled()) return out;
  if (options.ca_file.empty() || options.cert_file.empty() || options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs all of --tls_ca, --tls_cert and --tls_key (or none of them)");
  }
  absl::StatusOr<std::string> ca = ReadPem("tls_ca", options.ca_file, "CERTIFICATE");
  if (!ca.ok()) return ca.status();
  absl::StatusOr<std::string> cert = ReadPem("tls_cert", options.cert_file, "CERTIFICATE");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem("tls_key", options.key_file, "PRIVATE KEY");
  if (!key.ok()) return key.status();

  grpc::SslServerCredentialsOptions server(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  server.pem_root_certs = *ca;
  server.pem_key_cert_pairs.push_back({*key, *cert});
  out.server_ = grpc::SslServerCredentials(server);

  grpc::SslCredentialsOptions channel;
  channel.pem_root_certs = *ca;
  channel.pem_private_key = *key;
  channel.pem_cert_chain = *cert;
  out.channel_ = grpc::SslCredentials(channel);
  out.enabled_ = true;
  return out;
}

std::shared_ptr<grpc::ChannelCredentials> OrInsecure(
    const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  return creds != nullptr ? creds : grpc::InsecureChannelCredentials();
}

std::string TlsHintForUnavailable(bool client_uses_tls) {
  return client_uses_tls
             ? " (this client speaks TLS: check that the server runs with --tls_ca, --tls_cert "
               "and --tls_key too, and that one CA signs both certificates)"
             : " (if the cluster runs with mutual TLS, pass --tls_ca, --tls_cert and --tls_key, "
               "or set EMBER_TLS_CA/CERT/KEY)";
}

std::string PeerCommonName(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return "";
  std::vector<grpc::string_ref> names = auth->FindPropertyValues("x509_common_name");
  if (names.empty()) return "";
  return std::string(names.front().data(), names.front().size());
}

}  // namespace ember
