// Copyright 2026 The Ember Authors.

#include "tests/support/raw_h2.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ember {
namespace {

// The client preface (RFC 9113 section 3.4) and an empty SETTINGS frame.
std::string Hello() {
  std::string hello = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  const char settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
  hello.append(settings, sizeof(settings));
  return hello;
}

// One connected socket that has sent Hello() (or that the server closed first), or -1.
int Connect(const std::string& host, int port, const std::string& source,
            const std::string& hello) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (!source.empty()) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    if (inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1 ||
        bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0) {
      close(fd);
      return -1;
    }
  }
  timeval timeout{2, 0};  // a full backlog must not hang the test
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  // A server that refuses connections closes them at accept, maybe before this send:
  // the connection was opened all the same, and CountClosedByServer counts it.
  send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
  return fd;
}

}  // namespace

absl::StatusOr<RawH2Flood> RawH2Flood::Open(const std::string& host, int port, int count,
                                            const std::string& source) {
  RawH2Flood flood;
  const std::string hello = Hello();
  for (int i = 0; i < count; ++i) {
    const int fd = Connect(host, port, source, hello);
    if (fd < 0) break;
    flood.fds_.push_back(fd);
    flood.closed_.push_back(false);
  }
  if (flood.fds_.empty()) {
    return absl::UnavailableError(absl::StrCat("raw h2: cannot connect to ", host, ":", port));
  }
  return flood;
}

RawH2Flood::RawH2Flood(RawH2Flood&& other) noexcept
    : fds_(std::exchange(other.fds_, {})), closed_(std::exchange(other.closed_, {})) {}

RawH2Flood& RawH2Flood::operator=(RawH2Flood&& other) noexcept {
  if (this != &other) {
    CloseAll();
    fds_ = std::exchange(other.fds_, {});
    closed_ = std::exchange(other.closed_, {});
  }
  return *this;
}

RawH2Flood::~RawH2Flood() { CloseAll(); }

int RawH2Flood::CountClosedByServer() {
  int closed = 0;
  char buffer[4096];
  for (size_t i = 0; i < fds_.size(); ++i) {
    while (!closed_[i]) {
      const ssize_t n = recv(fds_[i], buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n > 0) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
      closed_[i] = true;  // EOF or reset
    }
    if (closed_[i]) ++closed;
  }
  return closed;
}

void RawH2Flood::CloseAll() {
  for (int fd : fds_) close(fd);
  fds_.clear();
  closed_.clear();
}

}  // namespace ember
