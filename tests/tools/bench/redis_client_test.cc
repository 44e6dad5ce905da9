// Copyright 2026 The Ember Authors.
//
// The cluster suite's Redis client (tools/bench/redis_client.h) against a real
// redis-server (Debian's /usr/bin/redis-server) on a free loopback port: MSET then
// MGET returns the values, pipelined MGETs return their replies in send order, a
// missing key is NOT_FOUND, a value of the wrong size or a short buffer is an error
// that names it, and a stopped server is UNAVAILABLE.

#include "tools/bench/redis_client.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/scratch_dir.h"

namespace ember::bench {
namespace {

constexpr char kRedisBinary[] = "/usr/bin/redis-server";
constexpr size_t kValueBytes = 256;

class RedisClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok()) << dir_.error();
    auto server = RedisServer::Start(kRedisBinary, dir_.path() + "/redis");
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto conn = RedisConnection::Connect(server_->port());
    ASSERT_TRUE(conn.ok()) << conn.status();
    conn_ = std::move(*conn);
  }

  // `n` keys "k<first>".. and their values: byte j of key i is (i * 7 + j) mod 256.
  static std::vector<std::string> Keys(int first, int n) {
    std::vector<std::string> keys;
    for (int i = first; i < first + n; ++i) keys.push_back(absl::StrCat("k", i));
    return keys;
  }
  static std::string Values(int first, int n) {
    std::string values(n * kValueBytes, '\0');
    for (int i = 0; i < n; ++i) {
      for (size_t j = 0; j < kValueBytes; ++j) {
        values[i * kValueBytes + j] = static_cast<char>(((first + i) * 7 + j) % 256);
      }
    }
    return values;
  }

  ScratchDir dir_{"redis_client_test"};
  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<RedisConnection> conn_;
};

TEST_F(RedisClientTest, MgetReturnsWhatMsetStored) {
  ASSERT_TRUE(conn_->Mset(Keys(0, 1000), Values(0, 1000), kValueBytes).ok());
  std::vector<char> out(1000 * kValueBytes);
  ASSERT_TRUE(conn_->SendMget(Keys(0, 1000)).ok());
  ASSERT_TRUE(conn_->ReadMget(1000, kValueBytes, absl::MakeSpan(out)).ok());
  EXPECT_EQ(std::string(out.data(), out.size()), Values(0, 1000));
}

TEST_F(RedisClientTest, PipelinedMgetsReplyInSendOrder) {
  ASSERT_TRUE(conn_->Mset(Keys(0, 1000), Values(0, 1000), kValueBytes).ok());
  // Four MGETs of different key ranges outstanding at once, then their replies.
  for (int call = 0; call < 4; ++call) {
    ASSERT_TRUE(conn_->SendMget(Keys(call * 200, 300)).ok()) << call;
  }
  for (int call = 0; call < 4; ++call) {
    std::vector<char> out(300 * kValueBytes);
    ASSERT_TRUE(conn_->ReadMget(300, kValueBytes, absl::MakeSpan(out)).ok()) << call;
    EXPECT_EQ(std::string(out.data(), out.size()), Values(call * 200, 300)) << call;
  }
  // The connection stays usable after the pipeline drains.
  EXPECT_TRUE(conn_->Ping().ok());
}

TEST_F(RedisClientTest, MissingKeyIsNotFoundAndTheConnectionStaysUsable) {
  ASSERT_TRUE(conn_->Mset(Keys(0, 2), Values(0, 2), kValueBytes).ok());
  std::vector<char> out(3 * kValueBytes);
  ASSERT_TRUE(conn_->SendMget(Keys(0, 3)).ok());
  const absl::Status s = conn_->ReadMget(3, kValueBytes, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "key 2")) << s;
  EXPECT_TRUE(conn_->Ping().ok());
}

TEST_F(RedisClientTest, ValueOfAnotherSizeIsAnErrorNamingTheKey) {
  ASSERT_TRUE(conn_->Mset(Keys(0, 2), Values(0, 2), kValueBytes).ok());
  std::vector<char> out(2 * 128);
  ASSERT_TRUE(conn_->SendMget(Keys(0, 2)).ok());
  const absl::Status s = conn_->ReadMget(2, 128, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "key 0: expected 128 bytes")) << s;
}

TEST_F(RedisClientTest, BadSizesAreInvalidArgumentAndSendNothing) {
  const absl::Status mset = conn_->Mset(Keys(0, 2), Values(0, 1), kValueBytes);
  EXPECT_EQ(mset.code(), absl::StatusCode::kInvalidArgument) << mset;
  std::vector<char> short_out(kValueBytes);
  const absl::Status read = conn_->ReadMget(2, kValueBytes, absl::MakeSpan(short_out));
  EXPECT_EQ(read.code(), absl::StatusCode::kInvalidArgument) << read;
  // Nothing was sent or read: the next command's reply is its own.
  EXPECT_TRUE(conn_->Ping().ok());
  ASSERT_TRUE(conn_->SendMget(Keys(0, 1)).ok());
  EXPECT_EQ(conn_->ReadMget(1, kValueBytes, absl::MakeSpan(short_out)).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RedisClientTest, StoppedServerIsUnavailable) {
  const int port = server_->port();
  ASSERT_TRUE(server_->Stop(absl::Seconds(5)).ok());
  const absl::Status ping = conn_->Ping();
  EXPECT_EQ(ping.code(), absl::StatusCode::kUnavailable) << ping;
  auto conn = RedisConnection::Connect(port, absl::Seconds(2));
  ASSERT_FALSE(conn.ok());
  EXPECT_EQ(conn.status().code(), absl::StatusCode::kUnavailable) << conn.status();
  EXPECT_TRUE(absl::StrContains(conn.status().message(), absl::StrCat("127.0.0.1:", port)))
      << conn.status();
}

}  // namespace
}  // namespace ember::bench
