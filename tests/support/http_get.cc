// Copyright 2026 The Ember Authors.

#include "tests/support/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace ember {

// GET http://127.0.0.1:`port``path`; returns the body of a 200 response. UNAVAILABLE if
// nothing listens or the connection fails, DEADLINE_EXCEEDED if a send or receive
// stalls for `timeout`, INTERNAL for a non-200 status.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path, absl::Duration timeout) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  // Bounds connect, every send and every recv.
  const timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string error = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect 127.0.0.1:", port, ": ", error));
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1:", port,
                                           "\r\nAccept: */*\r\nConnection: close\r\n\r\n");
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const bool stalled = errno == EAGAIN || errno == EWOULDBLOCK;
      close(fd);
      return stalled ? absl::DeadlineExceededError("send timed out")
                     : absl::UnavailableError("send failed");
    }
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char chunk[8192];
  while (true) {
    const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const bool stalled = errno == EAGAIN || errno == EWOULDBLOCK;
      close(fd);
      return stalled ? absl::DeadlineExceededError("recv timed out")
                     : absl::UnavailableError("recv failed");
    }
    if (n == 0) break;
    response.append(chunk, static_cast<size_t>(n));
  }
  close(fd);
  const size_t header_end = response.find("\r\n\r\n");
  if (header_end == std::string::npos) {
    return absl::UnavailableError(absl::StrCat("truncated HTTP response from port ", port));
  }
  const absl::string_view status_line =
      absl::string_view(response).substr(0, response.find("\r\n"));
  const std::vector<absl::string_view> parts = absl::StrSplit(status_line, ' ');
  if (parts.size() < 2 || parts[1] != "200") {
    return absl::InternalError(absl::StrCat("GET ", path, ": ", status_line));
  }
  return response.substr(header_end + 4);
}

}  // namespace ember
