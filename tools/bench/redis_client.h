// Copyright 2026 The Ember Authors.
//
// Redis for the cluster suite (cluster_bench.cc): a redis-server child process on a
// free local port, and a blocking connection through hiredis (Debian's libhiredis,
// the C client that HugeCTR's HPS uses through redis++) that speaks MSET and MGET of
// fixed-size values, with MGETs pipelined by the caller (append several, then read
// the replies in order).
//
//   EMBER_ASSIGN_OR_RETURN(auto redis, RedisServer::Start("/usr/bin/redis-server", dir));
//   EMBER_ASSIGN_OR_RETURN(auto conn, RedisConnection::Connect(redis->port()));
//   EMBER_RETURN_IF_ERROR(conn->Mset(keys, values, 256));
//   EMBER_RETURN_IF_ERROR(conn->SendMget(keys));
//   EMBER_RETURN_IF_ERROR(conn->ReadMget(keys.size(), 256, out));
//
// hiredis errors are translated here, once:
//   | hiredis                                   | absl::Status      |
//   |-------------------------------------------|-------------------|
//   | connect failed (refused, timed out)       | UNAVAILABLE       |
//   | REDIS_ERR_IO, errno EAGAIN (a timeout)    | DEADLINE_EXCEEDED |
//   | REDIS_ERR_IO otherwise, REDIS_ERR_EOF     | UNAVAILABLE       |
//   | REDIS_ERR_PROTOCOL, _OOM, _OTHER          | INTERNAL          |
//   | a REDIS_REPLY_ERROR reply ("-ERR ...")    | INTERNAL          |
// After any error but NOT_FOUND and INVALID_ARGUMENT the connection is unusable.
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

struct redisContext;  // hiredis.h; only redis_client.cc includes it

namespace ember::bench {

// The hiredis version compiled in ("0.14.1").
std::string HiredisVersion();

// A redis-server child: no persistence (--save "", --appendonly no), not daemonized,
// bound to 127.0.0.1 on a free port, its log in `dir`/redis.log. Stopped by PID
// (SIGTERM, then SIGKILL) by Stop or the destructor.
class RedisServer {
 public:
  // Starts `binary` with its working directory `dir` (created if missing) and waits
  // until it answers PING. Errors: UNAVAILABLE if it did not start or answer within
  // `timeout` (see `dir`/redis.log), INTERNAL for fork failures.
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

// One hiredis connection (redisContext, blocking mode, TCP_NODELAY) to Redis on
// 127.0.0.1. Every connect, send and receive has a `timeout` (hiredis's connect
// timeout and redisSetTimeout: SO_SNDTIMEO / SO_RCVTIMEO).
class RedisConnection {
 public:
  // Errors: UNAVAILABLE if the connection is refused or times out.
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Connect(
      int port, absl::Duration timeout = absl::Seconds(10));
  ~RedisConnection();

  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // PING, waiting for its reply. REQUIRES: no MGET reply is outstanding.
  absl::Status Ping();

  // MSET keys[0] values[0] keys[1] values[1] ..., waiting for its reply
  // (redisCommandArgv). REQUIRES: no MGET reply is outstanding.
  // INVALID_ARGUMENT (nothing sent) if values.size() != keys.size() * value_bytes.
  absl::Status Mset(absl::Span<const std::string> keys, std::string_view values,
                    size_t value_bytes);

  // Sends MGET keys... (redisAppendCommandArgv, then redisBufferWrite until hiredis's
  // output buffer is empty, so the request is on the wire before the caller reads
  // any reply: "N pipelined" means N requests really outstanding). Its reply is
  // read by ReadMget, in send order.
  absl::Status SendMget(absl::Span<const std::string> keys);
  // Reads the reply of the oldest outstanding MGET (redisGetReply) of `count` keys
  // whose values are each `value_bytes` long, and copies the values into `out`
  // (row-major). REQUIRES: out.size() == count * value_bytes (else INVALID_ARGUMENT,
  // nothing read). NOT_FOUND if a key had no value (the reply is consumed);
  // INTERNAL for a reply of another shape.
  absl::Status ReadMget(size_t count, size_t value_bytes, absl::Span<char> out);

 private:
  explicit RedisConnection(redisContext* context) : context_(context) {}

  // The status of the context's error after a failed hiredis call; `what` names it.
  absl::Status ContextError(std::string_view what, int saved_errno) const;

  redisContext* context_;  // owned; redisFree in the destructor
  // Argument vectors handed to hiredis, reused by every command (no allocation).
  std::vector<const char*> argv_;
  std::vector<size_t> argv_len_;
};

}  // namespace ember::bench

#endif  // EMBER_TOOLS_BENCH_REDIS_CLIENT_H_
