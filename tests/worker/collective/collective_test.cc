// Copyright 2026 The Ember Authors.
//
// Tests of Collective against a real ember-coordinator process (ephemeral port, temp
// data dir, one per test suite; each test uses its own job name). The ranks of a job run
// as threads of this process, each with its own Collective. Covers: world size 1 without
// a coordinator, allreduce correctness and bitwise determinism across ranks and runs,
// barrier, AllToAll with uneven and empty messages, a rank that never joins, a peer that
// disappears or stalls mid-job, generations that must not meet, bad options, and
// CoordinatorStore's split values. MeasureAllReduce prints loopback timings.

#include "worker/collective/collective.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tools/harness/process.h"
#include "worker/collective/coordinator_store.h"

#ifndef EMBER_COORDINATOR_BINARY
#error "EMBER_COORDINATOR_BINARY must name the ember-coordinator binary"
#endif

namespace ember::worker {
namespace {

// Timeout of the tests where every rank shows up; generous for slow CI machines.
constexpr absl::Duration kTimeout = absl::Seconds(30);
// Timeout of the tests where a rank is missing, gone or stuck.
constexpr absl::Duration kShortTimeout = absl::Seconds(2);
// How much later than its timeout a failing call may return (diagnosis, teardown, CI).
constexpr absl::Duration kSlack = absl::Seconds(3);

// Runs fn(rank) on one thread per rank and joins them (every operation is bounded).
void RunRanks(int world_size, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

std::vector<uint32_t> Bits(const std::vector<float>& v) {
  std::vector<uint32_t> bits(v.size());
  std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
  return bits;
}

// Values spanning 40 binary orders of magnitude with both signs, so that the order of a
// float sum changes its last bits.
std::vector<float> Gradients(int rank, size_t n) {
  std::vector<float> v(n);
  uint64_t state = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1);
  for (size_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double unit = static_cast<double>(state >> 40) / static_cast<double>(1ull << 24);
    const int exponent = static_cast<int>((state >> 20) % 40) - 20;
    v[i] = static_cast<float>(std::ldexp(unit - 0.5, exponent));
  }
  return v;
}

// The bytes rank `from` sends to rank `to`: sizes from 0 to ~200 KB, binary content.
std::string Payload(int from, int to, int world_size) {
  const int kind = (from * 3 + to * 5 + world_size) % 4;
  const size_t size = kind == 0   ? 0
                      : kind == 1 ? 1 + from
                      : kind == 2 ? 70000 + 13 * to
                                  : 200000 + 7 * from;
  std::string s(size, '\0');
  for (size_t k = 0; k < size; ++k) s[k] = static_cast<char>(k * 31 + from * 7 + to);
  return s;
}

class CollectiveTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string tmpl = absl::StrCat(::testing::TempDir(), "/collective_test.XXXXXX");
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(mkdtemp(buf.data()), nullptr);
    dir_ = new std::string(buf.data());
    // Started from the main thread, which outlives it (PR_SET_PDEATHSIG).
    absl::StatusOr<std::unique_ptr<Process>> p = Process::Start(
        EMBER_COORDINATOR_BINARY, {absl::StrCat("--data_dir=", *dir_, "/db"), "--port=0"},
        "listening on ", absl::Seconds(30));
    ASSERT_TRUE(p.ok()) << p.status();
    coordinator_ = p->release();
    address_ = new std::string(coordinator_->ready_text());
  }

  static void TearDownTestSuite() {
    if (coordinator_ != nullptr) {
      absl::StatusOr<int> code = coordinator_->Stop(absl::Seconds(10));
      EXPECT_TRUE(code.ok() && *code == 0) << "ember-coordinator did not exit cleanly";
      delete coordinator_;
      coordinator_ = nullptr;
    }
    if (dir_ != nullptr) {
      std::error_code ignored;
      std::filesystem::remove_all(*dir_, ignored);
    }
    delete dir_;
    delete address_;
    dir_ = address_ = nullptr;
  }

  void SetUp() override { ASSERT_NE(coordinator_, nullptr); }

  // A job name unique to the running test.
  static std::string Job(absl::string_view suffix = "") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return absl::StrCat(info->name(), suffix);
  }

  static CollectiveOptions Options(int rank, int world_size, const std::string& job,
                                   uint64_t generation = 0, absl::Duration timeout = kTimeout) {
    CollectiveOptions o;
    o.coordinator_address = *address_;
    o.job = job;
    o.generation = generation;
    o.rank = rank;
    o.world_size = world_size;
    o.timeout = timeout;
    return o;
  }

  // Connects all ranks of (job, generation) concurrently. Fails the test (and returns
  // nullptrs) when one cannot connect.
  static std::vector<std::unique_ptr<Collective>> ConnectAll(int world_size, const std::string& job,
                                                             uint64_t generation = 0,
                                                             absl::Duration timeout = kTimeout) {
    std::vector<std::unique_ptr<Collective>> out(world_size);
    RunRanks(world_size, [&](int r) {
      absl::StatusOr<std::unique_ptr<Collective>> c =
          Collective::Connect(Options(r, world_size, job, generation, timeout));
      EXPECT_TRUE(c.ok()) << "rank " << r << ": " << c.status();
      if (c.ok()) out[r] = *std::move(c);
    });
    return out;
  }

  // AllReduceSum of Gradients(rank, n) on every rank of `collectives`; returns each rank's
  // result.
  static std::vector<std::vector<float>> ReduceGradients(
      std::vector<std::unique_ptr<Collective>>& collectives, size_t n) {
    const int world_size = static_cast<int>(collectives.size());
    std::vector<std::vector<float>> out(world_size);
    RunRanks(world_size, [&](int r) {
      out[r] = Gradients(r, n);
      const absl::Status s = collectives[r]->AllReduceSum(absl::MakeSpan(out[r]));
      EXPECT_TRUE(s.ok()) << "rank " << r << ": " << s;
    });
    return out;
  }

  static std::string* dir_;
  static std::string* address_;
  static Process* coordinator_;
};

std::string* CollectiveTest::dir_ = nullptr;
std::string* CollectiveTest::address_ = nullptr;
Process* CollectiveTest::coordinator_ = nullptr;

TEST_F(CollectiveTest, WorldSizeOneNeedsNoCoordinator) {
  CollectiveOptions o;  // no coordinator_address
  absl::StatusOr<std::unique_ptr<Collective>> c = Collective::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->rank(), 0);
  EXPECT_EQ((*c)->world_size(), 1);
  std::vector<float> data = {1.5f, -2.0f, 3.25f};
  ASSERT_TRUE((*c)->AllReduceSum(absl::MakeSpan(data)).ok());
  EXPECT_EQ(data, (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_TRUE((*c)->Barrier().ok());
  absl::StatusOr<std::vector<std::string>> recv = (*c)->AllToAll({std::string("a\0b", 3)});
  ASSERT_TRUE(recv.ok()) << recv.status();
  EXPECT_EQ(*recv, std::vector<std::string>{std::string("a\0b", 3)});
  EXPECT_EQ((*c)->AllToAll({"a", "b"}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CollectiveTest, BadOptionsAreInvalidArgument) {
  const std::vector<std::pair<std::string, std::function<void(CollectiveOptions&)>>> cases = {
      {"world_size 0", [](CollectiveOptions& o) { o.world_size = 0; }},
      {"negative rank", [](CollectiveOptions& o) { o.rank = -1; }},
      {"rank == world_size", [](CollectiveOptions& o) { o.rank = 2; }},
      {"no coordinator", [](CollectiveOptions& o) { o.coordinator_address.clear(); }},
      {"zero timeout", [](CollectiveOptions& o) { o.timeout = absl::ZeroDuration(); }},
      {"negative timeout", [](CollectiveOptions& o) { o.timeout = absl::Seconds(-1); }},
      {"infinite timeout", [](CollectiveOptions& o) { o.timeout = absl::InfiniteDuration(); }},
      {"empty job", [](CollectiveOptions& o) { o.job.clear(); }},
      {"job with slash", [](CollectiveOptions& o) { o.job = "a/b"; }},
      {"long job", [](CollectiveOptions& o) { o.job = std::string(200, 'j'); }},
      {"empty host", [](CollectiveOptions& o) { o.host.clear(); }},
      {"unresolvable host", [](CollectiveOptions& o) { o.host = "no-such-host.invalid"; }},
  };
  for (const auto& [name, mutate] : cases) {
    CollectiveOptions o = Options(0, 2, Job(), 0, kShortTimeout);
    mutate(o);
    const absl::Time start = absl::Now();
    absl::StatusOr<std::unique_ptr<Collective>> c = Collective::Connect(o);
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << name << ": " << c.status();
    EXPECT_LT(absl::Now() - start, kShortTimeout) << name;
  }
}

TEST_F(CollectiveTest, CoordinatorUnreachableIsUnavailable) {
  CollectiveOptions o = Options(0, 2, Job(), 0, absl::Seconds(1));
  o.coordinator_address = "127.0.0.1:1";  // nothing listens on port 1
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<Collective>> c = Collective::Connect(o);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1) + kSlack);
}

TEST_F(CollectiveTest, AllReduceSumIsCorrectAndBitwiseDeterministic) {
  constexpr size_t kSizes[] = {1, 7, 1000, (1 << 20) + 3};
  for (int world_size : {2, 3}) {
    SCOPED_TRACE(absl::StrCat("world_size ", world_size));
    // The data must make the order of summation visible, or the test proves nothing.
    if (world_size == 3) {
      const size_t n = 1000;
      const std::vector<float> a = Gradients(0, n), b = Gradients(1, n), c = Gradients(2, n);
      size_t order_sensitive = 0;
      for (size_t i = 0; i < n; ++i) {
        const float x = (a[i] + b[i]) + c[i];
        const float y = a[i] + (b[i] + c[i]);
        const float z = (a[i] + c[i]) + b[i];
        order_sensitive += (x != y || x != z) ? 1 : 0;
      }
      ASSERT_GT(order_sensitive, n / 10);
    }
    // Two runs: two generations of the job, each connected afresh.
    std::vector<std::vector<std::vector<float>>> runs;  // [run][size index] -> rank 0 result
    for (uint64_t generation : {0, 1}) {
      std::vector<std::unique_ptr<Collective>> cs =
          ConnectAll(world_size, Job(absl::StrCat("_w", world_size)), generation);
      for (const auto& c : cs) ASSERT_NE(c, nullptr);
      std::vector<std::vector<float>> per_size;
      for (size_t n : kSizes) {
        SCOPED_TRACE(absl::StrCat("n ", n));
        const std::vector<std::vector<float>> out = ReduceGradients(cs, n);
        for (int r = 1; r < world_size; ++r) {
          ASSERT_EQ(Bits(out[r]), Bits(out[0])) << "rank " << r << " differs from rank 0";
        }
        // Correct within float rounding of world_size terms.
        std::vector<std::vector<float>> inputs;
        for (int r = 0; r < world_size; ++r) inputs.push_back(Gradients(r, n));
        for (size_t i = 0; i < n; ++i) {
          double exact = 0, magnitude = 0;
          for (int r = 0; r < world_size; ++r) {
            exact += inputs[r][i];
            magnitude += std::fabs(inputs[r][i]);
          }
          ASSERT_NEAR(out[0][i], exact, 4 * world_size * 6e-8 * magnitude) << "element " << i;
        }
        // The same call again in the same run gives the same bits.
        EXPECT_EQ(Bits(ReduceGradients(cs, n)[0]), Bits(out[0]));
        per_size.push_back(out[0]);
      }
      runs.push_back(std::move(per_size));
    }
    for (size_t k = 0; k < runs[0].size(); ++k) {
      EXPECT_EQ(Bits(runs[1][k]), Bits(runs[0][k])) << "runs differ for size " << kSizes[k];
    }
  }
}

TEST_F(CollectiveTest, AllReduceSumRejectsDifferentCountsWithoutBreaking) {
  std::vector<std::unique_ptr<Collective>> cs = ConnectAll(2, Job());
  for (const auto& c : cs) ASSERT_NE(c, nullptr);
  RunRanks(2, [&](int r) {
    std::vector<float> data(r == 0 ? 10 : 12, 1.0f);
    const absl::Status s = cs[r]->AllReduceSum(absl::MakeSpan(data));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "rank " << r << ": " << s;
    std::vector<float> same(10, static_cast<float>(r + 1));
    EXPECT_TRUE(cs[r]->AllReduceSum(absl::MakeSpan(same)).ok());
    EXPECT_EQ(same, std::vector<float>(10, 3.0f));
    std::vector<float> empty;
    EXPECT_TRUE(cs[r]->AllReduceSum(absl::MakeSpan(empty)).ok());
  });
}

TEST_F(CollectiveTest, BarrierWaitsForEveryRank) {
  constexpr int kWorld = 3;
  constexpr int kRounds = 5;
  std::vector<std::unique_ptr<Collective>> cs = ConnectAll(kWorld, Job());
  for (const auto& c : cs) ASSERT_NE(c, nullptr);
  std::vector<std::atomic<int>> arrived(kRounds);
  RunRanks(kWorld, [&](int r) {
    for (int round = 0; round < kRounds; ++round) {
      arrived[round].fetch_add(1);
      const absl::Status s = cs[r]->Barrier();
      ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s;
      EXPECT_EQ(arrived[round].load(), kWorld) << "rank " << r << " left round " << round;
    }
  });
}

TEST_F(CollectiveTest, AllToAllWithUnevenAndEmptyMessages) {
  for (int world_size : {2, 3}) {
    SCOPED_TRACE(absl::StrCat("world_size ", world_size));
    std::vector<std::unique_ptr<Collective>> cs =
        ConnectAll(world_size, Job(absl::StrCat("_w", world_size)));
    for (const auto& c : cs) ASSERT_NE(c, nullptr);
    RunRanks(world_size, [&](int r) {
      std::vector<std::string> send(world_size);
      for (int j = 0; j < world_size; ++j) send[j] = Payload(r, j, world_size);
      absl::StatusOr<std::vector<std::string>> recv = cs[r]->AllToAll(send);
      ASSERT_TRUE(recv.ok()) << "rank " << r << ": " << recv.status();
      ASSERT_EQ(recv->size(), static_cast<size_t>(world_size));
      for (int j = 0; j < world_size; ++j) {
        EXPECT_EQ((*recv)[j], Payload(j, r, world_size)) << "rank " << r << " from " << j;
      }
      // Everything empty.
      recv = cs[r]->AllToAll(std::vector<std::string>(world_size));
      ASSERT_TRUE(recv.ok()) << "rank " << r << ": " << recv.status();
      EXPECT_EQ(*recv, std::vector<std::string>(world_size));
      // A wrong number of messages is refused locally and does not break the collective.
      EXPECT_EQ(cs[r]->AllToAll({"x"}).status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_TRUE(cs[r]->Barrier().ok());
    });
  }
}

TEST_F(CollectiveTest, MissingRankFailsConnectWithDeadlineExceeded) {
  struct Case {
    int world_size;
    std::vector<int> present;
    std::string missing;  // as named in the error
  };
  for (const Case& c : {Case{3, {0, 1}, "[2]"}, Case{2, {1}, "[0]"}}) {
    const std::string job = Job(absl::StrCat("_w", c.world_size));
    RunRanks(static_cast<int>(c.present.size()), [&](int i) {
      const absl::Time start = absl::Now();
      absl::StatusOr<std::unique_ptr<Collective>> col =
          Collective::Connect(Options(c.present[i], c.world_size, job, 0, kShortTimeout));
      const absl::Duration elapsed = absl::Now() - start;
      EXPECT_EQ(col.status().code(), absl::StatusCode::kDeadlineExceeded) << col.status();
      EXPECT_TRUE(absl::StrContains(col.status().message(), c.missing)) << col.status();
      EXPECT_LT(elapsed, kShortTimeout + kSlack);
    });
  }
}

TEST_F(CollectiveTest, PeerThatDisappearsFailsTheOthersWithinTheTimeout) {
  for (int world_size : {2, 3}) {
    SCOPED_TRACE(absl::StrCat("world_size ", world_size));
    const int leaver = world_size - 1;
    std::vector<std::unique_ptr<Collective>> cs =
        ConnectAll(world_size, Job(absl::StrCat("_w", world_size)), 0, kShortTimeout);
    for (const auto& c : cs) ASSERT_NE(c, nullptr);
    absl::Notification gone;
    RunRanks(world_size, [&](int r) {
      ASSERT_TRUE(cs[r]->Barrier().ok());
      if (r == leaver) {
        cs[r].reset();  // closes its connections
        gone.Notify();
        return;
      }
      ASSERT_TRUE(gone.WaitForNotificationWithTimeout(absl::Seconds(20)));
      std::vector<float> data(1 << 20, 1.0f);  // large enough to write into closed sockets
      const absl::Time start = absl::Now();
      const absl::Status s = cs[r]->AllReduceSum(absl::MakeSpan(data));
      EXPECT_LT(absl::Now() - start, kShortTimeout + kSlack);
      EXPECT_TRUE(s.code() == absl::StatusCode::kUnavailable ||
                  s.code() == absl::StatusCode::kDeadlineExceeded)
          << "rank " << r << ": " << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "AllReduceSum")) << s;
      // Broken from now on: fails at once.
      const absl::Status again = cs[r]->Barrier();
      EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
      EXPECT_EQ(cs[r]->AllToAll(std::vector<std::string>(world_size)).status().code(),
                absl::StatusCode::kFailedPrecondition);
    });
  }
}

// The peer closes while this rank is writing a large buffer to it: the writes fail
// (EPIPE / reset), which must be an error, not a SIGPIPE that kills the process.
TEST_F(CollectiveTest, PeerThatDisappearsDuringATransferIsAnError) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::vector<std::unique_ptr<Collective>> cs =
        ConnectAll(2, Job(absl::StrCat("_", attempt)), 0, kShortTimeout);
    for (const auto& c : cs) ASSERT_NE(c, nullptr);
    RunRanks(2, [&](int r) {
      ASSERT_TRUE(cs[r]->Barrier().ok());
      if (r == 1) {
        cs[r].reset();
        return;
      }
      std::vector<float> data(16 << 20, 1.0f);
      const absl::Status s = cs[r]->AllReduceSum(absl::MakeSpan(data));
      EXPECT_TRUE(s.code() == absl::StatusCode::kUnavailable ||
                  s.code() == absl::StatusCode::kDeadlineExceeded)
          << "rank " << r << ": " << s;
    });
  }
}

TEST_F(CollectiveTest, StuckPeerFailsTheOperationWithDeadlineExceeded) {
  std::vector<std::unique_ptr<Collective>> cs = ConnectAll(2, Job(), 0, kShortTimeout);
  for (const auto& c : cs) ASSERT_NE(c, nullptr);
  absl::Notification done;
  RunRanks(2, [&](int r) {
    if (r == 1) {  // connected, but never joins the operation
      EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
      return;
    }
    const absl::Time start = absl::Now();
    const absl::Status s = cs[0]->Barrier();
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "Barrier")) << s;
    EXPECT_LT(absl::Now() - start, kShortTimeout + kSlack);
    done.Notify();
  });
}

TEST_F(CollectiveTest, GenerationsDoNotInterfere) {
  const std::string job = Job();
  std::vector<std::unique_ptr<Collective>> gen0 = ConnectAll(2, job, 0);
  for (const auto& c : gen0) ASSERT_NE(c, nullptr);
  // Generation 1 connects while generation 0 is alive; each reduces its own data.
  std::vector<std::unique_ptr<Collective>> gen1 = ConnectAll(2, job, 1);
  for (const auto& c : gen1) ASSERT_NE(c, nullptr);
  RunRanks(2, [&](int r) {
    for (int step = 0; step < 3; ++step) {
      std::vector<float> a(100, static_cast<float>(r + 1));       // sums to 3
      std::vector<float> b(100, static_cast<float>(10 * r + 5));  // sums to 20
      ASSERT_TRUE(gen0[r]->AllReduceSum(absl::MakeSpan(a)).ok());
      ASSERT_TRUE(gen1[r]->AllReduceSum(absl::MakeSpan(b)).ok());
      EXPECT_EQ(a, std::vector<float>(100, 3.0f));
      EXPECT_EQ(b, std::vector<float>(100, 20.0f));
    }
  });
  // Generation 2 with rank 1 absent must not meet rank 1's earlier entries.
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<Collective>> lone =
      Collective::Connect(Options(0, 2, job, 2, kShortTimeout));
  EXPECT_EQ(lone.status().code(), absl::StatusCode::kDeadlineExceeded) << lone.status();
  EXPECT_TRUE(absl::StrContains(lone.status().message(), "[1]")) << lone.status();
  EXPECT_LT(absl::Now() - start, kShortTimeout + kSlack);
}

// Loopback timings, 2 ranks (printed, not asserted): median and mean per call.
TEST_F(CollectiveTest, MeasureAllReduce) {
  std::vector<std::unique_ptr<Collective>> cs = ConnectAll(2, Job());
  for (const auto& c : cs) ASSERT_NE(c, nullptr);
  for (const auto& [n, iterations] : {std::pair<size_t, int>{1 << 20, 30}, {7000, 300}}) {
    std::vector<double> ms(iterations);
    RunRanks(2, [&](int r) {
      std::vector<float> data(n, 0.5f);
      for (int i = 0; i < 3; ++i) ASSERT_TRUE(cs[r]->AllReduceSum(absl::MakeSpan(data)).ok());
      for (int i = 0; i < iterations; ++i) {
        const absl::Time start = absl::Now();
        ASSERT_TRUE(cs[r]->AllReduceSum(absl::MakeSpan(data)).ok());
        if (r == 0) ms[i] = absl::ToDoubleMilliseconds(absl::Now() - start);
      }
    });
    double mean = 0;
    for (double m : ms) mean += m / iterations;
    std::sort(ms.begin(), ms.end());
    std::printf("allreduce %zu floats, 2 ranks, loopback: median %.3f ms, mean %.3f ms\n", n,
                ms[iterations / 2], mean);
    RecordProperty(absl::StrCat("allreduce_median_ms_", n), std::to_string(ms[iterations / 2]));
  }
}

TEST_F(CollectiveTest, CoordinatorStoreSplitsLargeValues) {
  const absl::Time deadline = absl::Now() + kTimeout;
  CoordinatorStore store(grpc::CreateChannel(*address_, grpc::InsecureChannelCredentials()),
                         *address_, absl::StrCat("rdzv/", Job(), "/0/"), deadline);
  std::string big(3 * CoordinatorStore::kMaxValueBytes + 17, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  ASSERT_TRUE(store.Set("big", big).ok());
  ASSERT_TRUE(store.Set("empty", "").ok());
  absl::StatusOr<std::string> got = store.Get("big", deadline);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, big);
  got = store.Get("empty", deadline);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "");
  EXPECT_EQ(store.Contains("big", deadline).value_or(false), true);
  EXPECT_EQ(store.Contains("absent", deadline).value_or(true), false);
  const absl::Time start = absl::Now();
  got = store.Get("absent", absl::Now() + absl::Milliseconds(300));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_LT(absl::Now() - start, kSlack);
}

}  // namespace
}  // namespace ember::worker
