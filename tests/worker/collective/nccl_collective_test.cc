// Copyright 2026 The Ember Authors.
//
// The NCCL DeviceCollective (worker/collective/nccl_collective.cc) on real GPUs.
//
// How ranks are covered: NCCL refuses two ranks of one communicator on one GPU, so a
// multi-rank test needs as many GPUs as ranks. Here the ranks run as threads of this
// process, rank r on device r (NCCL allows several ranks per process on distinct
// devices; the rendezvous goes through a real ember-coordinator as in a job). On a
// machine with one GPU only the one-rank test and the peer that never comes (rank 0 of
// two, alone) run; the two-rank tests skip, naming why.

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/local_cluster.h"
#include "tests/support/scratch_dir.h"
#include "tests/worker/dense/cuda_test_util.h"
#include "worker/collective/device_collective.h"

namespace ember::worker {
namespace {

using testing::DeviceVector;
using testing::Random;

class NcclCollectiveTest : public ::testing::Test {
 protected:
  // One coordinator for the suite (its key-value store carries the NCCL unique id).
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("nccl_collective_test");
    ASSERT_TRUE(dir_->ok()) << dir_->error();
    LocalClusterOptions options;
    options.dir = dir_->path();
    cluster_ = new LocalCluster(std::move(options));
    ASSERT_TRUE(cluster_->StartCoordinator().ok());
  }

  static void TearDownTestSuite() {
    if (cluster_ != nullptr) {
      EXPECT_TRUE(cluster_->StopAll().ok());
    }
    delete cluster_;
    delete dir_;
    cluster_ = nullptr;
    dir_ = nullptr;
  }

  static CollectiveOptions Options(int rank, int world_size, const std::string& job,
                                   absl::Duration timeout) {
    CollectiveOptions o;
    o.coordinator_address = cluster_->coordinator_address();
    o.job = job;
    o.rank = rank;
    o.world_size = world_size;
    o.timeout = timeout;
    return o;
  }

  // Connects ranks 0..world_size-1 of `job` concurrently, rank r on device r.
  static std::vector<std::unique_ptr<DeviceCollective>> ConnectAll(int world_size,
                                                                   const std::string& job,
                                                                   absl::Duration timeout) {
    std::vector<std::unique_ptr<DeviceCollective>> out(world_size);
    RunRanks(world_size, [&](int r) {
      absl::StatusOr<std::unique_ptr<DeviceCollective>> c =
          DeviceCollective::Connect(Options(r, world_size, job, timeout), r);
      EXPECT_TRUE(c.ok()) << "rank " << r << ": " << c.status();
      if (c.ok()) out[r] = *std::move(c);
    });
    return out;
  }

  static void RunRanks(int world_size, const std::function<void(int)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < world_size; ++r) threads.emplace_back(fn, r);
    for (std::thread& t : threads) t.join();
  }

  static ScratchDir* dir_;
  static LocalCluster* cluster_;
};

ScratchDir* NcclCollectiveTest::dir_ = nullptr;
LocalCluster* NcclCollectiveTest::cluster_ = nullptr;

// One rank: the communicator comes up (no coordinator needed) and the all-reduce is the
// identity.
TEST_F(NcclCollectiveTest, OneRankAllReduce) {
  EMBER_SKIP_WITHOUT_GPU();
  CollectiveOptions options;
  options.timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<DeviceCollective>> nccl = DeviceCollective::Connect(options, 0);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  EXPECT_EQ((*nccl)->world_size(), 1);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const std::vector<float> values = Random(100003, 3);
  DeviceVector<float> data(values, stream);
  ASSERT_TRUE((*nccl)->AllReduceSum(absl::MakeSpan(data.get(), values.size()), stream).ok());
  EXPECT_EQ(data.Read(), values);
  EXPECT_TRUE((*nccl)->AllReduceSum({}, stream).ok());
  cudaStreamDestroy(stream);
}

// Rank 0 of two, and rank 1 never comes: the communicator's set-up fails within the
// timeout (aborted, not left blocking), and the device stays usable. One GPU suffices.
TEST_F(NcclCollectiveTest, APeerThatNeverComesFailsTheConnectInTime) {
  EMBER_SKIP_WITHOUT_GPU();
  absl::StatusOr<std::unique_ptr<DeviceCollective>> nccl =
      DeviceCollective::Connect(Options(0, 2, "never_comes", absl::Seconds(3)), 0);
  ASSERT_FALSE(nccl.ok());
  EXPECT_EQ(nccl.status().code(), absl::StatusCode::kDeadlineExceeded) << nccl.status();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Two ranks on two GPUs: each gets the sum, bitwise the same on both.
TEST_F(NcclCollectiveTest, TwoRanksSumBitwiseAlike) {
  EMBER_SKIP_WITH_FEWER_GPUS(2);
  std::vector<std::unique_ptr<DeviceCollective>> ranks =
      ConnectAll(2, "two_ranks", absl::Seconds(60));
  ASSERT_TRUE(ranks[0] && ranks[1]);
  const size_t n = 1 << 20;
  std::vector<std::vector<float>> got(2);
  RunRanks(2, [&](int r) {
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    cudaStream_t stream;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    DeviceVector<float> data(Random(n, 40 + r), stream);
    const absl::Status s = ranks[r]->AllReduceSum(absl::MakeSpan(data.get(), n), stream);
    EXPECT_TRUE(s.ok()) << "rank " << r << ": " << s;
    got[r] = data.Read();
    cudaStreamDestroy(stream);
  });
  EXPECT_EQ(got[0], got[1]);
  const std::vector<float> a = Random(n, 40), b = Random(n, 41);
  for (size_t i = 0; i < n; i += 4099) EXPECT_EQ(got[0][i], a[i] + b[i]) << i;
}

// A dead peer: rank 1 stops taking part. Rank 0's all-reduce fails within its timeout,
// the communicator is aborted at that failure (so the reduction's kernel ends and the
// rank's stream runs on: the synchronize below would block forever otherwise), and
// later calls fail at once. Rank 1, calling afterwards, fails too (its peer aborted).
TEST_F(NcclCollectiveTest, ADeadPeerFailsTheAllReduceAndAbortsTheCommunicator) {
  EMBER_SKIP_WITH_FEWER_GPUS(2);
  std::vector<std::unique_ptr<DeviceCollective>> ranks =
      ConnectAll(2, "dead_peer", absl::Seconds(20));
  ASSERT_TRUE(ranks[0] && ranks[1]);
  const size_t n = 4096;
  auto all_reduce = [&](int r) {
    EXPECT_EQ(cudaSetDevice(r), cudaSuccess);
    cudaStream_t stream;
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    DeviceVector<float> data(Random(n, r), stream);
    const absl::Status s = ranks[r]->AllReduceSum(absl::MakeSpan(data.get(), n), stream);
    EXPECT_FALSE(s.ok()) << "rank " << r;
    EXPECT_TRUE(s.code() == absl::StatusCode::kDeadlineExceeded ||
                s.code() == absl::StatusCode::kUnavailable)
        << "rank " << r << ": " << s;
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess) << "rank " << r;
    EXPECT_EQ(ranks[r]->AllReduceSum(absl::MakeSpan(data.get(), n), stream).code(),
              absl::StatusCode::kFailedPrecondition);
    cudaStreamDestroy(stream);
  };
  all_reduce(0);  // rank 1 is not there
  all_reduce(1);  // rank 0 has aborted
}

}  // namespace
}  // namespace ember::worker
