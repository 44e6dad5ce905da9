// Copyright 2026 The Ember Authors.
//
// ConnectionGate (server/shared/connection_gate.h) in front of a real gRPC server in this
// process: what it binds, what it admits and refuses, and how it sees closes. The
// multi-process cases (a flood, a shard out of descriptors) are in
// tests/cluster/shard_bounds_test.cc. Part of ps_parts_test.

#include "server/shared/connection_gate.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

// A gRPC server (a generic service that answers nothing) behind a gate.
struct GatedServer {
  explicit GatedServer(const ConnectionLimits& limits, const std::string& host = "127.0.0.1") {
    absl::StatusOr<std::unique_ptr<ConnectionGate>> listened =
        ConnectionGate::Listen(host, 0, limits);
    EXPECT_TRUE(listened.ok()) << listened.status();
    if (!listened.ok()) return;
    gate = *std::move(listened);
    grpc::ServerBuilder builder;
    builder.RegisterCallbackGenericService(&generic);  // a server that answers connections
    auto acceptor = builder.experimental().AddExternalConnectionAcceptor(
        grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
        grpc::InsecureServerCredentials());
    server = builder.BuildAndStart();
    gate->Start(std::move(acceptor));
  }
  ~GatedServer() {
    if (gate != nullptr) gate->Stop();
    if (server != nullptr) server->Shutdown();
  }
  grpc::CallbackGenericService generic;
  std::unique_ptr<ConnectionGate> gate;
  std::unique_ptr<grpc::Server> server;
};

// A raw client connection that sent the HTTP/2 preface and an empty SETTINGS frame.
struct RawConnection {
  RawConnection(int port, const std::string& source, int family = AF_INET) {
    fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (family == AF_INET) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      inet_pton(AF_INET, source.c_str(), &from.sin_addr);
      bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from));
      sockaddr_in to{};
      to.sin_family = AF_INET;
      to.sin_port = htons(static_cast<uint16_t>(port));
      inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
      connected = connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0;
    } else {
      sockaddr_in6 to{};
      to.sin6_family = AF_INET6;
      to.sin6_port = htons(static_cast<uint16_t>(port));
      inet_pton(AF_INET6, "::1", &to.sin6_addr);
      connected = connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0;
    }
    std::string hello = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    const char settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    hello.append(settings, sizeof(settings));
    send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
  }
  ~RawConnection() { close(fd); }

  // True when the server answered with bytes (gRPC's SETTINGS: admitted), false when it
  // closed the connection (refused) or sent nothing within 10 s.
  bool Served() const {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) return false;
    char buffer[64];
    return recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT) > 0;
  }

  int fd = -1;
  bool connected = false;
};

TEST(ConnectionGateTest, RefusesBeyondThePeersBoundAndAdmitsAgainOnceOneCloses) {
  GatedServer s({.max_connections = 0, .max_per_peer = 2});
  ASSERT_NE(s.gate, nullptr);
  auto a = std::make_unique<RawConnection>(s.gate->port(), "127.0.0.2");
  RawConnection b(s.gate->port(), "127.0.0.2");
  ASSERT_TRUE(a->connected && b.connected);
  EXPECT_TRUE(a->Served());
  EXPECT_TRUE(b.Served());
  RawConnection c(s.gate->port(), "127.0.0.2");
  EXPECT_FALSE(c.Served());
  RawConnection other(s.gate->port(), "127.0.0.3");  // another address has its own 2
  EXPECT_TRUE(other.Served());
  EXPECT_EQ(s.gate->OpenFrom("127.0.0.2"), 2);
  EXPECT_EQ(s.gate->counts().refused_peer, 1);

  a.reset();  // gRPC sees the close and closes its descriptor: the slot frees
  bool admitted = false;
  for (int i = 0; i < 100 && !admitted; ++i) {
    if (s.gate->OpenFrom("127.0.0.2") < 2)
      admitted = RawConnection(s.gate->port(), "127.0.0.2").Served();
    if (!admitted) usleep(50000);
  }
  EXPECT_TRUE(admitted);
  EXPECT_EQ(s.gate->counts().refused_peer, 1);
}

TEST(ConnectionGateTest, RefusesBeyondTheBoundInAll) {
  GatedServer s({.max_connections = 2, .max_per_peer = 0});
  ASSERT_NE(s.gate, nullptr);
  RawConnection a(s.gate->port(), "127.0.0.2");
  RawConnection b(s.gate->port(), "127.0.0.3");
  EXPECT_TRUE(a.Served());
  EXPECT_TRUE(b.Served());
  RawConnection c(s.gate->port(), "127.0.0.4");
  EXPECT_FALSE(c.Served());
  const ConnectionGate::Counts counts = s.gate->counts();
  EXPECT_EQ(counts.open, 2);
  EXPECT_EQ(counts.refused_total, 1);
  EXPECT_EQ(counts.refused_peer, 0);
}

TEST(ConnectionGateTest, TheIpv6WildcardTakesIpv4AndIpv6Clients) {
  GatedServer s({}, "[::]");
  ASSERT_NE(s.gate, nullptr);
  RawConnection v4(s.gate->port(), "127.0.0.1");
  RawConnection v6(s.gate->port(), "", AF_INET6);
  if (!v6.connected) GTEST_SKIP() << "no IPv6 loopback here";
  EXPECT_TRUE(v4.Served());
  EXPECT_TRUE(v6.Served());
  EXPECT_EQ(s.gate->OpenFrom("127.0.0.1"), 1);  // IPv4-mapped, written as IPv4
  EXPECT_EQ(s.gate->OpenFrom("::1"), 1);
}

TEST(ConnectionGateTest, AnAddressItCannotBindIsAClearError) {
  absl::StatusOr<std::unique_ptr<ConnectionGate>> first =
      ConnectionGate::Listen("127.0.0.1", 0, {});
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  absl::StatusOr<std::unique_ptr<ConnectionGate>> again =
      ConnectionGate::Listen("127.0.0.1", port, {});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(again.status().message(),
                                absl::StrCat("cannot listen on 127.0.0.1:", port, ": ")))
      << again.status();
  EXPECT_TRUE(absl::StrContains(again.status().message(), "in use")) << again.status();
  absl::StatusOr<std::unique_ptr<ConnectionGate>> nowhere =
      ConnectionGate::Listen("no-such-host.invalid", 0, {});
  ASSERT_FALSE(nowhere.ok());
  EXPECT_TRUE(
      absl::StrContains(nowhere.status().message(), "cannot listen on no-such-host.invalid:0"))
      << nowhere.status();
}

TEST(ConnectionGateTest, TheDefaultBoundInAllIsHalfTheOpenFileLimit) {
  rlimit open_files{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &open_files), 0);
  const ConnectionLimits limits = ConnectionLimitsFor(-1, 256);
  EXPECT_EQ(limits.max_connections,
            std::min<int64_t>(static_cast<int64_t>(open_files.rlim_cur) / 2, 16384));
  EXPECT_EQ(limits.max_per_peer, 256);
  EXPECT_EQ(ConnectionLimitsFor(0, 0).max_connections, 0);
  EXPECT_EQ(ConnectionLimitsFor(7, 0).max_connections, 7);
}

}  // namespace
}  // namespace ember
