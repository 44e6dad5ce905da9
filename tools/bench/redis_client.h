// Copyright 2026 The Ember Authors.
//
// Redis for the cluster suite (cluster_bench.cc): a redis-server child process on a
// free local port, and a minimal blocking RESP2 connection that speaks just MSET and
// MGET of fixed-size values, with requests pipelined by the caller (send several,
// then read the replies in order). No dependency on hiredis.
//
//   EMBER_ASSIGN_OR_RETURN(auto redis, RedisServer::Start("/usr/bin/redis-server", dir));
//   EMBER_ASSIGN_OR_RETURN(auto conn, RedisConnection::Connect(redis->port()));
//   EMBER_RETURN_IF_ERROR(conn->SendMget(keys));
//   EMBER_RETURN_IF_ERROR(conn->ReadMget(keys.size(), 256, out));
//
// Thread-safety: one thread at a time per object.

#ifndef EMBER_TOOLS_BENCH_REDIS_CLIENT_H_
#define EMBER_TOOLS_BENCH_REDIS_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "tools/harness/process.h"

namespace ember::bench {

// A redis-server child: no persistence (--save "", --appendonly no), not daemonized,
// bound to 127.0.0.1 on a free port, its log in `dir`/redis.log. Stopped by PID
// (SIGTERM, then SIGKILL) by Stop or the destructor.
class RedisServer {
 public:
  // Starts `binary` with its working directory `dir` (created if missing) and waits
  // until it answers PING. Errors: UNAVAILABLE if it did not start or answer within
  // `timeout` (see `dir`/redis.log), INTERNAL for fork/socket failures.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(
      const std::string& binary, const std::string& dir,
      absl::Duration timeout = absl::Seconds(20));

  int port() const { return port_; }
  pid_t pid() const { return process_->pid(); }

  // SIGTERM, SIGKILL after `grace`; returns the exit code (see Process::Stop).
  absl::StatusOr<int> Stop(absl::Duration grace) { return process_->Stop(grace); }

 private:
  RedisServer(std::unique_ptr<Process> process, int port)
      : process_(std::move(process)), port_(port) {}

  std::unique_ptr<Process> process_;  // its destructor SIGKILLs a running child
  int port_;
};

// One TCP connection to Redis. Every send and receive has a `timeout` (SO_SNDTIMEO /
// SO_RCVTIMEO); a timeout is DEADLINE_EXCEEDED and leaves the connection unusable.
class RedisConnection {
 public:
  // Errors: UNAVAILABLE if the connection is refused or times out.
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Connect(
      int port, absl::Duration timeout = absl::Seconds(10));
  ~RedisConnection();

  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends PING and reads the reply. Errors: as SendMget/ReadOk.
  absl::Status Ping();

  // Sends MSET keys[0] values[0] keys[1] values[1] ... (reply: ReadOk).
  // REQUIRES: values.size() == keys.size() * value_bytes.
  absl::Status SendMset(absl::Span<const std::string> keys, std::string_view values,
                        size_t value_bytes);
  // Reads a "+OK"-style simple-string reply. INTERNAL for an error or unexpected reply.
  absl::Status ReadOk();

  // Sends MGET keys... (reply: ReadMget).
  absl::Status SendMget(absl::Span<const std::string> keys);
  // Reads the reply of an MGET of `count` keys whose values are each `value_bytes`
  // long into `out` (row-major). REQUIRES: out.size() == count * value_bytes.
  // NOT_FOUND if a key had no value; INTERNAL for any other unexpected reply.
  absl::Status ReadMget(size_t count, size_t value_bytes, absl::Span<char> out);

 private:
  explicit RedisConnection(int fd);

  absl::Status SendAll(std::string_view bytes);
  // Reads one "\r\n"-terminated line (without the terminator) into `line`.
  absl::Status ReadLine(std::string_view* line);
  // Copies the next `n` bytes into `out` (nullptr: discards them).
  absl::Status ReadBytes(size_t n, char* out);
  // Receives more bytes into in_; DEADLINE_EXCEEDED / UNAVAILABLE on timeout / EOF.
  absl::Status Fill();

  int fd_;
  std::string out_;       // the command being built
  std::vector<char> in_;  // received, not yet consumed: in_[head_, tail_)
  size_t head_ = 0;
  size_t tail_ = 0;
};

}  // namespace ember::bench

#endif  // EMBER_TOOLS_BENCH_REDIS_CLIENT_H_
