// Copyright 2026 The Ember Authors.

#include "tools/bench/redis_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tools/harness/ports.h"

namespace ember::bench {
namespace {

constexpr size_t kReadChunk = size_t{1} << 20;

// Debian's Abseil has its own string_view, which StrCat takes but std's does not convert to.
absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status ErrnoError(absl::StatusCode code, std::string_view what) {
  return absl::Status(code, absl::StrCat(Absl(what), ": ", std::strerror(errno)));
}

void AppendBulk(std::string* out, std::string_view bytes) {
  absl::StrAppend(out, "$", bytes.size(), "\r\n");
  out->append(bytes);
  out->append("\r\n");
}

// The integer after the type byte of a RESP line ("*1000", "$256").
bool ParseCount(std::string_view line, int64_t* n) {
  auto [ptr, ec] = std::from_chars(line.data() + 1, line.data() + line.size(), *n);
  return ec == std::errc() && ptr == line.data() + line.size();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(const std::string& binary,
                                                                const std::string& dir,
                                                                absl::Duration timeout) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  absl::StatusOr<int> port = FreeLoopbackPort();
  if (!port.ok()) return port.status();
  // redis-server prints no line that starts with a fixed prefix, so a shell prints one
  // and then execs redis-server in its place: the PID Process holds is redis-server's.
  const std::vector<std::string> args = {"-c",
                                         "echo started && exec \"$0\" \"$@\"",
                                         binary,
                                         "--port",
                                         std::to_string(*port),
                                         "--bind",
                                         "127.0.0.1",
                                         "--save",
                                         "",
                                         "--appendonly",
                                         "no",
                                         "--daemonize",
                                         "no",
                                         "--dir",
                                         dir,
                                         "--logfile",
                                         dir + "/redis.log"};
  absl::StatusOr<std::unique_ptr<Process>> process =
      Process::Start("/bin/sh", args, "started", timeout);
  if (!process.ok()) return process.status();
  std::unique_ptr<RedisServer> server(new RedisServer(std::move(*process), *port));

  // Ready once it answers PING; connection refused until it listens.
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last;
  while (absl::Now() < deadline) {
    absl::StatusOr<std::unique_ptr<RedisConnection>> conn = RedisConnection::Connect(*port);
    if (conn.ok()) {
      last = (*conn)->Ping();
      if (last.ok()) return server;
    } else {
      last = conn.status();
    }
    absl::SleepFor(absl::Milliseconds(20));  // polling a child's startup; no event to wait on
  }
  return absl::UnavailableError(absl::StrCat("redis-server on port ", *port,
                                             " did not answer PING (see ", dir,
                                             "/redis.log): ", last.message()));
}

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(int port,
                                                                          absl::Duration timeout) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoError(absl::StatusCode::kInternal, "socket");
  std::unique_ptr<RedisConnection> conn(new RedisConnection(fd));
  const timeval tv = absl::ToTimeval(timeout);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoError(absl::StatusCode::kUnavailable, absl::StrCat("connect 127.0.0.1:", port));
  }
  return conn;
}

RedisConnection::RedisConnection(int fd) : fd_(fd), in_(kReadChunk * 2) {}

RedisConnection::~RedisConnection() { close(fd_); }

absl::Status RedisConnection::Ping() {
  if (absl::Status s = SendAll("*1\r\n$4\r\nPING\r\n"); !s.ok()) return s;
  return ReadOk();  // "+PONG"
}

absl::Status RedisConnection::SendMset(absl::Span<const std::string> keys, std::string_view values,
                                       size_t value_bytes) {
  if (values.size() != keys.size() * value_bytes) {
    return absl::InvalidArgumentError("MSET: values size does not match keys");
  }
  out_.clear();
  absl::StrAppend(&out_, "*", 1 + 2 * keys.size(), "\r\n");
  AppendBulk(&out_, "MSET");
  for (size_t i = 0; i < keys.size(); ++i) {
    AppendBulk(&out_, keys[i]);
    AppendBulk(&out_, values.substr(i * value_bytes, value_bytes));
  }
  return SendAll(out_);
}

absl::Status RedisConnection::ReadOk() {
  std::string_view line;
  if (absl::Status s = ReadLine(&line); !s.ok()) return s;
  if (line.empty() || line[0] != '+') {
    return absl::InternalError(
        absl::StrCat("redis: expected +OK, got '", Absl(line.substr(0, 200)), "'"));
  }
  return absl::OkStatus();
}

absl::Status RedisConnection::SendMget(absl::Span<const std::string> keys) {
  out_.clear();
  absl::StrAppend(&out_, "*", 1 + keys.size(), "\r\n");
  AppendBulk(&out_, "MGET");
  for (const std::string& key : keys) AppendBulk(&out_, key);
  return SendAll(out_);
}

absl::Status RedisConnection::ReadMget(size_t count, size_t value_bytes, absl::Span<char> out) {
  if (out.size() != count * value_bytes) return absl::InvalidArgumentError("MGET: out size");
  std::string_view line;
  int64_t n = 0;
  if (absl::Status s = ReadLine(&line); !s.ok()) return s;
  if (line.empty() || line[0] != '*' || !ParseCount(line, &n) || n != static_cast<int64_t>(count)) {
    return absl::InternalError(
        absl::StrCat("redis MGET: expected *", count, ", got '", Absl(line.substr(0, 200)), "'"));
  }
  for (size_t i = 0; i < count; ++i) {
    if (absl::Status s = ReadLine(&line); !s.ok()) return s;
    if (line == "$-1") return absl::NotFoundError("redis MGET: a key has no value");
    if (line.empty() || line[0] != '$' || !ParseCount(line, &n) ||
        n != static_cast<int64_t>(value_bytes)) {
      return absl::InternalError(absl::StrCat("redis MGET: expected $", value_bytes, ", got '",
                                              Absl(line.substr(0, 200)), "'"));
    }
    if (absl::Status s = ReadBytes(value_bytes, out.data() + i * value_bytes); !s.ok()) return s;
    if (absl::Status s = ReadBytes(2, nullptr); !s.ok()) return s;  // "\r\n"
  }
  return absl::OkStatus();
}

absl::Status RedisConnection::SendAll(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return absl::DeadlineExceededError("redis: send timed out");
    }
    if (n < 0) return ErrnoError(absl::StatusCode::kUnavailable, "redis: send");
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status RedisConnection::Fill() {
  if (head_ == tail_) head_ = tail_ = 0;
  if (in_.size() - tail_ < kReadChunk) {  // compact; a line never nears the buffer size
    std::memmove(in_.data(), in_.data() + head_, tail_ - head_);
    tail_ -= head_;
    head_ = 0;
  }
  while (true) {
    const ssize_t n = recv(fd_, in_.data() + tail_, in_.size() - tail_, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return absl::DeadlineExceededError("redis: receive timed out");
    }
    if (n < 0) return ErrnoError(absl::StatusCode::kUnavailable, "redis: recv");
    if (n == 0) return absl::UnavailableError("redis: connection closed");
    tail_ += static_cast<size_t>(n);
    return absl::OkStatus();
  }
}

absl::Status RedisConnection::ReadLine(std::string_view* line) {
  size_t scanned = head_;
  while (true) {
    const char* begin = in_.data() + scanned;
    const void* cr = tail_ > scanned ? std::memchr(begin, '\r', tail_ - scanned) : nullptr;
    if (cr != nullptr) {
      const size_t pos = static_cast<const char*>(cr) - in_.data();
      if (pos + 1 < tail_) {
        *line = std::string_view(in_.data() + head_, pos - head_);
        head_ = pos + 2;  // RESP lines end in "\r\n"; a bare '\r' never appears in one
        return absl::OkStatus();
      }
    }
    if (tail_ - head_ > kReadChunk) return absl::InternalError("redis: reply line too long");
    const size_t offset = tail_ - head_;
    if (absl::Status s = Fill(); !s.ok()) return s;
    scanned = head_ + (offset > 0 ? offset - 1 : 0);  // Fill may have moved the data
  }
}

absl::Status RedisConnection::ReadBytes(size_t n, char* out) {
  while (n > 0) {
    if (head_ == tail_) {
      if (absl::Status s = Fill(); !s.ok()) return s;
    }
    const size_t take = std::min(n, tail_ - head_);
    if (out != nullptr) {
      std::memcpy(out, in_.data() + head_, take);
      out += take;
    }
    head_ += take;
    n -= take;
  }
  return absl::OkStatus();
}

}  // namespace ember::bench
