// Copyright 2026 The Ember Authors.

#include "server/shared/listener_check.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/log.h"

namespace ember {
namespace {

// The HTTP/2 client connection preface (RFC 9113 section 3.4) and an empty SETTINGS
// frame: length 0, type 4, no flags, stream 0.
constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr char kEmptySettings[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};

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
  if (status.ok()) {
    std::string hello(kPreface);
    hello.append(kEmptySettings, sizeof(kEmptySettings));
    if (send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(hello.size())) {
      status = Unavailable("send", address, errno);
    }
  }
  // Any reaction will do: the server's SETTINGS, a TLS alert, a close, a reset.
  if (status.ok() && !WaitFor(fd, POLLIN | POLLRDHUP, deadline)) {
    status = Unavailable(
        absl::StrCat("no answer to an HTTP/2 preface within ", absl::FormatDuration(timeout),
                     ": the server does not accept connections"),
        address, 0);
  }
  close(fd);
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
