// Copyright 2026 The Ember Authors.

#include "server/shared/listener_check.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/log.h"

namespace ember {
namespace {

// How often a probe looks at the listen backlog while it waits.
constexpr absl::Duration kBacklogPoll = absl::Milliseconds(10);

// A wildcard bind address is probed on loopback.
std::string ProbeHost(const std::string& host) {
  std::string h(absl::StripSuffix(absl::StripPrefix(host, "["), "]"));
  if (h.empty() || h == "0.0.0.0") return "127.0.0.1";
  if (h == "::") return "::1";
  return h;
}

// Waits for `events` on `fd` until `deadline`. True if they came.
bool WaitFor(int fd, short events, absl::Time deadline) {
  while (true) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(ms));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

absl::Status Unavailable(absl::string_view what, absl::string_view address, int error) {
  return absl::UnavailableError(
      absl::StrCat("listener probe of ", address, ": ", what,
                   error != 0 ? absl::StrCat(": ", strerror(error)) : ""));
}

}  // namespace

absl::StatusOr<int64_t> AcceptBacklog(int port) {
  int64_t waiting = 0;
  bool any = false;
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(path);
    if (!in) continue;  // no IPv6
    any = true;
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      // "sl local_address rem_address st tx_queue:rx_queue ...", addresses "HEX:PORT".
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues;
      if (!(fields >> slot >> local >> remote >> state >> queues)) continue;
      if (state != "0A") continue;  // TCP_LISTEN
      const size_t colon = local.rfind(':');
      int64_t local_port = 0, backlog = 0;
      if (colon == std::string::npos ||
          !absl::SimpleHexAtoi(absl::string_view(local).substr(colon + 1), &local_port) ||
          local_port != port) {
        continue;
      }
      const size_t split = queues.find(':');
      if (split == std::string::npos ||
          !absl::SimpleHexAtoi(absl::string_view(queues).substr(split + 1), &backlog)) {
        continue;
      }
      waiting += backlog;  // a listening socket's rx_queue: connections not yet accepted
    }
  }
  if (!any) return absl::UnavailableError("cannot read /proc/net/tcp (out of descriptors?)");
  return waiting;
}

absl::Status ProbeListener(const std::string& host, int port, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const std::string probe_host = ProbeHost(host);
  const std::string address = absl::StrCat(probe_host, " port ", port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(probe_host.c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr) {
    return Unavailable("cannot resolve the address", address, 0);
  }
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int error = errno;
    freeaddrinfo(found);
    return Unavailable("socket", address, error);  // EMFILE: out of descriptors
  }
  absl::Status status = absl::OkStatus();
  if (connect(fd, found->ai_addr, found->ai_addrlen) != 0 && errno != EINPROGRESS) {
    status = Unavailable("connect", address, errno);
  }
  freeaddrinfo(found);
  if (status.ok()) {
    int error = 0;
    socklen_t length = sizeof(error);
    if (!WaitFor(fd, POLLOUT, deadline)) {
      status = Unavailable("connect timed out (listen backlog full?)", address, 0);
    } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
      status = Unavailable("connect", address, error);
    }
  }
  // Connected: the kernel holds the connection in the listen backlog until the server
  // accepts it. A live server empties the backlog within milliseconds.
  int64_t waiting = -1;
  while (status.ok()) {
    absl::StatusOr<int64_t> backlog = AcceptBacklog(port);
    if (!backlog.ok()) {
      status = Unavailable(backlog.status().message(), address, 0);
      break;
    }
    waiting = *backlog;
    if (waiting == 0) break;
    if (absl::Now() >= deadline) {
      status = Unavailable(
          absl::StrCat(waiting, " connections wait in the listen backlog after ",
                       absl::FormatDuration(timeout), ": the server does not accept connections"),
          address, 0);
      break;
    }
    absl::SleepFor(kBacklogPoll);
  }
  close(fd);  // before any byte: the server's handshake ends quietly (plaintext or TLS)
  return status;
}

ListenerCheck::ListenerCheck(ListenerCheckOptions options,
                             std::function<void(const std::string& why)> on_broken)
    : options_(std::move(options)), on_broken_(std::move(on_broken)), thread_([this] { Run(); }) {}

ListenerCheck::~ListenerCheck() { Stop(); }

void ListenerCheck::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void ListenerCheck::Run() {
  int failed = 0;
  while (!stop_.WaitForNotificationWithTimeout(options_.interval)) {
    const absl::Status probe = ProbeListener(options_.host, options_.port, options_.timeout);
    if (probe.ok()) {
      failed = 0;
      continue;
    }
    ++failed;
    EMBER_LOG(WARNING) << "listener check " << failed << " of " << options_.failures
                       << " failed: " << probe.message();
    if (failed >= options_.failures) {
      on_broken_(std::string(probe.message()));
      return;
    }
  }
}

}  // namespace ember
