// Copyright 2026 The Ember Authors.
//
// Fixtures of the cluster suite (cluster_bench.cc): a ring that keeps N calls in
// flight, and the calls it drives (PsClient pull/push, Redis MGET through hiredis).
//
// "N in flight" means N outstanding calls from one benchmark thread on one
// connection: for PsClient N PullAsync/PushAsync handles on one client (one gRPC
// channel per shard, HTTP/2 streams multiplexed on it); for Redis N MGETs pipelined
// on one TCP connection. Calls complete in the order they were started.
//
// Not thread-safe: one benchmark thread.

#ifndef EMBER_TOOLS_BENCH_CLUSTER_FIXTURES_H_
#define EMBER_TOOLS_BENCH_CLUSTER_FIXTURES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/ps_client.h"
#include "tools/bench/redis_client.h"
#include "tools/bench/storage_fixtures.h"

namespace ember::bench::cluster {

// One kind of call, started and finished by slot: the ring starts a call in a slot
// and later finishes the call of that slot, so a slot's buffers belong to at most
// one call at a time.
class Pipeline {
 public:
  virtual ~Pipeline() = default;
  // Starts a call in `slot`. REQUIRES: no call of `slot` is outstanding.
  virtual absl::Status Start(size_t slot) = 0;
  // Waits for the call of `slot` and returns its status.
  virtual absl::Status Finish(size_t slot) = 0;
};

// Keeps `depth` calls of a pipeline in flight. Each Step completes exactly one call:
// the first Step starts `depth` calls; every Step waits for the oldest call and
// starts a new one in its slot. Calls left in flight after the last Step are
// finished by Drain (or by the pipeline's destructor).
//
// Between two runs of the benchmark case the ring stays full: the calls in flight
// complete while other cases run, so the first `depth` Steps of a repetition find
// them done (a bias of depth / calls-per-repetition, < 1% at these rates).
class InFlightRing {
 public:
  // REQUIRES: depth >= 1; `pipeline` outlives the ring.
  InFlightRing(Pipeline* pipeline, size_t depth) : pipeline_(pipeline), depth_(depth) {}

  // Errors: the first failed Start or Finish; the ring is unusable afterwards.
  absl::Status Step();
  // Finishes every call in flight. Errors: the first failed Finish.
  absl::Status Drain();

 private:
  Pipeline* pipeline_;
  size_t depth_;
  size_t in_flight_ = 0;
  size_t oldest_ = 0;  // slot of the oldest call in flight
};

// Pulls `batch` keys of `stream` per call into a per-slot buffer.
class PsPullPipeline : public Pipeline {
 public:
  // REQUIRES: the table is registered with `client`; every argument outlives this.
  PsPullPipeline(PsClient* client, std::string table, size_t dim, const std::vector<uint64_t>* pool,
                 size_t batch, size_t slots);
  absl::Status Start(size_t slot) override;
  absl::Status Finish(size_t slot) override { return handles_[slot].Wait(); }

 private:
  PsClient* client_;
  std::string table_;
  KeyStream stream_;
  std::vector<std::vector<float>> out_;  // per slot
  std::vector<PsHandle> handles_;        // per slot; declared last: destroyed (waited) first
};

// Pushes the same `grads` for `batch` keys of `stream` per call, step 1, 2, ...
class PsPushPipeline : public Pipeline {
 public:
  // REQUIRES: grads.size() == batch * dim; every argument outlives this.
  PsPushPipeline(PsClient* client, std::string table, const std::vector<uint64_t>* pool,
                 size_t batch, absl::Span<const float> grads, size_t slots);
  absl::Status Start(size_t slot) override;
  absl::Status Finish(size_t slot) override { return handles_[slot].Wait(); }

 private:
  PsClient* client_;
  std::string table_;
  KeyStream stream_;
  absl::Span<const float> grads_;
  int64_t step_ = 0;
  std::vector<PsHandle> handles_;
};

// MGETs the Redis row keys (RedisRowKey) of `batch` keys of `stream` per call into a
// per-slot buffer of `value_bytes` per key. Finish reads the replies in send order.
class RedisMgetPipeline : public Pipeline {
 public:
  RedisMgetPipeline(RedisConnection* conn, uint64_t table_seed, const std::vector<uint64_t>* pool,
                    size_t batch, size_t value_bytes, size_t slots);
  absl::Status Start(size_t slot) override;
  absl::Status Finish(size_t slot) override;

 private:
  RedisConnection* conn_;
  uint64_t table_seed_;
  KeyStream stream_;
  size_t batch_;
  size_t value_bytes_;
  std::vector<std::string> keys_;       // reused by every Start
  std::vector<std::vector<char>> out_;  // per slot
};

// The Redis key of row `id` of the table with seed `table_seed`: Ember's RocksDB row
// key (server/store/row_layout.h), [slot: u16 big-endian][id: u64 big-endian], 10 bytes.
std::string RedisRowKey(uint64_t table_seed, uint64_t id);

// A PsClient of the single shard at `address` (static even map, epoch 1; worker 1);
// `credentials` null: plaintext.
absl::StatusOr<std::unique_ptr<PsClient>> SingleShardClient(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

// Pushes every id 0..rows-1 once, `batch` ids per push (gradients from `grads`, which
// holds at least batch x the table's dim values), so each has a stored row.
absl::Status PopulateRows(PsClient& client, const std::string& table, int64_t rows, size_t batch,
                          absl::Span<const float> grads);

// The directory holding this executable (dirname of /proc/self/exe), or "" if unknown.
std::string ExecutableDir();

}  // namespace ember::bench::cluster

#endif  // EMBER_TOOLS_BENCH_CLUSTER_FIXTURES_H_
