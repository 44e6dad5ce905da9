// Copyright 2026 The Ember Authors.
//
// The listener probe (server/shared/listener_check.h) against sockets of this process:
// a listener that accepts, one that never accepts (gRPC 1.51 after a failed accept4: the
// kernel still completes handshakes into the backlog), and a closed port.
// Part of ps_parts_test.

#include "server/shared/listener_check.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace ember {
namespace {

// A loopback listening socket on a free port. REQUIRES: the test ends with it.
struct Listener {
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    listen(fd, 16);
    socklen_t length = sizeof(address);
    getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    port = ntohs(address.sin_port);
  }
  ~Listener() { close(fd); }
  int fd = -1;
  int port = 0;
};

TEST(ListenerCheckTest, ProbeSucceedsWhenTheServerAccepts) {
  Listener listener;
  std::thread server([&] {
    const int client = accept(listener.fd, nullptr, nullptr);
    char buffer[64];
    (void)!read(client, buffer, sizeof(buffer));  // until the probe closes: no byte comes
    close(client);
  });
  EXPECT_TRUE(ProbeListener("127.0.0.1", listener.port, absl::Seconds(10)).ok());
  server.join();
}

TEST(ListenerCheckTest, ProbeFailsWhenNobodyAccepts) {
  Listener listener;  // listens, never accepts
  const absl::Status probe = ProbeListener("0.0.0.0", listener.port, absl::Milliseconds(300));
  EXPECT_EQ(probe.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(probe.message().find("does not accept connections"), std::string::npos) << probe;
  EXPECT_EQ(AcceptBacklog(listener.port).value_or(-1), 1);  // the probe's, closed unaccepted
}

TEST(ListenerCheckTest, ProbeFailsOnAClosedPort) {
  int port = 0;
  { port = Listener().port; }  // closed again
  const absl::Status probe = ProbeListener("127.0.0.1", port, absl::Seconds(2));
  EXPECT_EQ(probe.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(probe.message().find("connect"), std::string::npos) << probe;
}

TEST(ListenerCheckTest, ReportsBrokenAfterConsecutiveFailures) {
  Listener listener;  // never accepts
  absl::Notification broken;
  std::string why;
  ListenerCheck check({.host = "127.0.0.1",
                       .port = listener.port,
                       .interval = absl::Milliseconds(10),
                       .timeout = absl::Milliseconds(50),
                       .failures = 3},
                      [&](const std::string& reason) {
                        why = reason;
                        broken.Notify();
                      });
  ASSERT_TRUE(broken.WaitForNotificationWithTimeout(absl::Seconds(30)));
  check.Stop();
  EXPECT_NE(why.find("does not accept connections"), std::string::npos) << why;
  EXPECT_EQ(kExitRestartMe, 75);
}

}  // namespace
}  // namespace ember
