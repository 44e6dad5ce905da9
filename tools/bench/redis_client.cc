// Copyright 2026 The Ember Authors.

#include "tools/bench/redis_client.h"

#include <errno.h>
#include <hiredis/hiredis.h>

#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tools/harness/ports.h"

namespace ember::bench {
namespace {

// Debian's Abseil has its own string_view, which StrCat takes but std's does not convert to.
absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Frees a redisReply when it goes out of scope.
struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// A reply's text for error messages (status, error or string replies), at most 200 bytes.
absl::string_view ReplyText(const redisReply& reply) {
  if (reply.str == nullptr) return "";
  return absl::string_view(reply.str, std::min<size_t>(reply.len, 200));
}

}  // namespace

std::string HiredisVersion() {
  return absl::StrCat(HIREDIS_MAJOR, ".", HIREDIS_MINOR, ".", HIREDIS_PATCH);
}

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
  const timeval tv = absl::ToTimeval(timeout);
  redisContext* context = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (context == nullptr) return absl::InternalError("redis: cannot allocate a hiredis context");
  std::unique_ptr<RedisConnection> conn(new RedisConnection(context));
  if (context->err != 0) {
    return absl::UnavailableError(
        absl::StrCat("redis: connect 127.0.0.1:", port, ": ", context->errstr));
  }
  if (redisSetTimeout(context, tv) != REDIS_OK) {
    return absl::InternalError(absl::StrCat("redis: set timeout: ", context->errstr));
  }
  return conn;
}

RedisConnection::~RedisConnection() { redisFree(context_); }

absl::Status RedisConnection::ContextError(std::string_view what, int saved_errno) const {
  const std::string message = absl::StrCat("redis ", Absl(what), ": ", context_->errstr);
  switch (context_->err) {
    case REDIS_ERR_IO:
      if (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK) {
        return absl::DeadlineExceededError(absl::StrCat(message, " (timed out)"));
      }
      return absl::UnavailableError(message);
    case REDIS_ERR_EOF:
      return absl::UnavailableError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status RedisConnection::Ping() {
  Reply reply(static_cast<redisReply*>(redisCommand(context_, "PING")));
  if (reply == nullptr) return ContextError("PING", errno);
  if (reply->type != REDIS_REPLY_STATUS) {
    return absl::InternalError(absl::StrCat("redis PING: expected +PONG, got type ", reply->type,
                                            " '", ReplyText(*reply), "'"));
  }
  return absl::OkStatus();
}

absl::Status RedisConnection::Mset(absl::Span<const std::string> keys, std::string_view values,
                                   size_t value_bytes) {
  if (values.size() != keys.size() * value_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("redis MSET: ", values.size(),
                                                   " value bytes for ", keys.size(), " keys of ",
                                                   value_bytes, " bytes"));
  }
  argv_.assign(1, "MSET");
  argv_len_.assign(1, 4);
  for (size_t i = 0; i < keys.size(); ++i) {
    argv_.push_back(keys[i].data());
    argv_len_.push_back(keys[i].size());
    argv_.push_back(values.data() + i * value_bytes);
    argv_len_.push_back(value_bytes);
  }
  Reply reply(static_cast<redisReply*>(
      redisCommandArgv(context_, static_cast<int>(argv_.size()), argv_.data(), argv_len_.data())));
  if (reply == nullptr) return ContextError("MSET", errno);
  if (reply->type != REDIS_REPLY_STATUS) {
    return absl::InternalError(absl::StrCat("redis MSET: expected +OK, got type ", reply->type,
                                            " '", ReplyText(*reply), "'"));
  }
  return absl::OkStatus();
}

absl::Status RedisConnection::SendMget(absl::Span<const std::string> keys) {
  argv_.assign(1, "MGET");
  argv_len_.assign(1, 4);
  for (const std::string& key : keys) {
    argv_.push_back(key.data());
    argv_len_.push_back(key.size());
  }
  if (redisAppendCommandArgv(context_, static_cast<int>(argv_.size()), argv_.data(),
                             argv_len_.data()) != REDIS_OK) {
    return ContextError("MGET", errno);
  }
  // redisGetReply writes the output buffer only when no reply is buffered yet, which
  // would hold this request back while older replies are read: write it now.
  int done = 0;
  while (done == 0) {
    if (redisBufferWrite(context_, &done) != REDIS_OK) return ContextError("MGET send", errno);
  }
  return absl::OkStatus();
}

absl::Status RedisConnection::ReadMget(size_t count, size_t value_bytes, absl::Span<char> out) {
  if (out.size() != count * value_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("redis MGET: out holds ", out.size(),
                                                   " bytes, not ", count, " x ", value_bytes));
  }
  void* raw = nullptr;
  if (redisGetReply(context_, &raw) != REDIS_OK) return ContextError("MGET reply", errno);
  Reply reply(static_cast<redisReply*>(raw));
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != count) {
    return absl::InternalError(absl::StrCat("redis MGET: expected an array of ", count,
                                            ", got type ", reply->type, " of ", reply->elements,
                                            " '", ReplyText(*reply), "'"));
  }
  for (size_t i = 0; i < count; ++i) {
    const redisReply& value = *reply->element[i];
    if (value.type == REDIS_REPLY_NIL) {
      return absl::NotFoundError(absl::StrCat("redis MGET: key ", i, " has no value"));
    }
    if (value.type != REDIS_REPLY_STRING || static_cast<size_t>(value.len) != value_bytes) {
      return absl::InternalError(absl::StrCat("redis MGET: key ", i, ": expected ", value_bytes,
                                              " bytes, got type ", value.type, " of ", value.len));
    }
    std::memcpy(out.data() + i * value_bytes, value.str, value_bytes);
  }
  return absl::OkStatus();
}

}  // namespace ember::bench
