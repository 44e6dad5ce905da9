// Copyright 2026 The Ember Authors.
//
// Transport security of every gRPC channel: mutual TLS from three PEM files, the same
// three flags on every binary. A server given them accepts only clients that present a
// certificate signed by the CA (and speak TLS); a client given them checks the server's
// certificate against the CA and presents its own. Without them, plaintext (loopback
// development and tests).
//
//   --tls_ca=ca.pem --tls_cert=server.pem --tls_key=server.key
//
//   TlsOptions tls;                      // bound by DeclareTlsFlags in the binary's flags
//   EMBER_ASSIGN_OR_RETURN(TlsCredentials creds, TlsCredentials::Load(tls));
//   builder.AddListeningPort(address, creds.Server(), &port);
//   auto channel = grpc::CreateCustomChannel(peer, creds.Channel(), args);
//
// The identity of a TLS peer is its certificate's common name (PeerCommonName);
// common/admin_auth.h maps identities to the admin role.

#ifndef EMBER_COMMON_TLS_H_
#define EMBER_COMMON_TLS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/flags.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"

namespace ember {

// The three PEM files; all empty means plaintext.
struct TlsOptions {
  std::string ca_file;    // --tls_ca: the CA that signs every peer's certificate
  std::string cert_file;  // --tls_cert: this process's certificate (chain)
  std::string key_file;   // --tls_key: its private key

  bool enabled() const { return !ca_file.empty() || !cert_file.empty() || !key_file.empty(); }
};

// Declares --tls_ca, --tls_cert and --tls_key into *options, under a "Transport
// security" heading.
void DeclareTlsFlags(FlagSet& flags, TlsOptions* options);

// Loaded credentials; copyable and cheap to share (the gRPC objects are shared).
class TlsCredentials {
 public:
  // Plaintext.
  TlsCredentials();

  // Reads and checks the files: all three or none given, each readable and holding a
  // PEM block of the right kind (CERTIFICATE; PRIVATE KEY), the certificate and key
  // matching is left to the TLS library (a mismatch fails the first handshake).
  // INVALID_ARGUMENT naming the flag and file otherwise.
  static absl::StatusOr<TlsCredentials> Load(const TlsOptions& options);

  bool enabled() const { return enabled_; }
  // Credentials of a listening port: mutual TLS requiring and verifying client
  // certificates, or insecure when !enabled().
  std::shared_ptr<grpc::ServerCredentials> Server() const { return server_; }
  // Credentials of a channel: TLS with this process's certificate, or insecure.
  std::shared_ptr<grpc::ChannelCredentials> Channel() const { return channel_; }

 private:
  bool enabled_ = false;
  std::shared_ptr<grpc::ServerCredentials> server_;
  std::shared_ptr<grpc::ChannelCredentials> channel_;
};

// The channel credentials to use when an options struct may hold none: `creds`, or
// insecure credentials for null.
std::shared_ptr<grpc::ChannelCredentials> OrInsecure(
    const std::shared_ptr<grpc::ChannelCredentials>& creds);

// What to check when a server this client calls is UNAVAILABLE, as a parenthesized
// hint to append to the error: a plaintext client of a TLS cluster (and a TLS client of
// a plaintext one) only sees the connection closed.
std::string TlsHintForUnavailable(bool client_uses_tls);

// The common name of the peer's verified certificate; empty for a plaintext peer.
std::string PeerCommonName(const grpc::ServerContextBase& context);

}  // namespace ember

#endif  // EMBER_COMMON_TLS_H_
