// Copyright 2026 The Ember Authors.
//
// `ember-bench serving`: a read-only follower (`ember-serving`, server/serving/follower.h)
// next to a PS cluster under a training load: how fresh its rows are and how fast it
// answers Lookup, against the training PS itself. Every figure comes from one run:
//  1. On loopback, found next to ember-bench and stopped by PID however the suite ends:
//     ember-coordinator (--expected_shards=2, checkpoints in the scratch directory) and
//     shards 0 and 1 (ember-ps, 256 MiB memory tier, WAL on), data in a scratch
//     directory removed at the end. First the served model for step 8: ember-datagen data
//     (20000 training, 2000 test examples) and a one-worker quickstart job of 50 steps
//     (serving_predict.h), which checkpoints at its end. Then table "train" (dim 16,
//     Adagrad) of R = --rows_small rows (rounded down to a multiple of 1000), populated by
//     pushing every id IdOfRank(0..R-1) once, 1000 per push.
//  2. ember-serving with the coordinator's --checkpoint_dir and defaults otherwise (1 GiB
//     memory tier, progress marks every 100 ms, positions persisted every 1 s): it
//     bootstraps from the served model's checkpoint (its small tables; its dense tower)
//     and follows every shard from the checkpoint's cut, so "train" arrives through the
//     streams. The suite waits until it has applied every shard's newest version
//     (follower_catchup_seconds).
//  3. Idle freshness: 10 x --repetitions probes as in 6, without load.
//  4. Idle Lookup throughput: kLookupThreads threads, each with its own follower stub and
//     its own PsClient, one call in flight, 1000 Zipf(--zipf) keys of "train" per call.
//     --warmup seconds of each first (the follower's memory tier starts empty: the stream
//     writes rows it does not hold straight to its RocksDB), then --repetitions rounds of
//     --min_time seconds on the follower and as long on the PS (order alternating);
//     figures are medians.
//  5. Training load: 2 workers, each a thread with its own PsClient (worker_id 1, 2): pull
//     1000 Zipf keys of "train", push gradients for them, as fast as the shards answer.
//     --warmup seconds before anything is measured.
//  6. Freshness under load: 40 x --repetitions probes from a third PsClient. A probe reads
//     a fresh id (rank R + offset: never pulled or pushed) from the follower, pushes one
//     gradient for it and notes when the Push returned (acknowledged). A poller reads all
//     pending probe ids from the follower in one Lookup every 1 ms; lag = end of the first
//     Lookup that returns a changed value - acknowledgment (an upper bound, by up to one
//     poll plus one Lookup). Probes start 25-75 ms apart at random, whether or not earlier
//     ones are visible yet. A probe not visible after 5 s counts as 5 s (probes_timed_out).
//  7. Lookup throughput under load: as 4, without the warm-up.
//  8. Predict under load (serving_predict.h): 1-row and 100-row batches of the served
//     model's test lines, one call in flight, --min_time seconds each, then as long the
//     Lookups the same rows need (one call per table, in turn) as the baseline. The same
//     without load after step 4, after one pass over the test lines (100 per call: the
//     follower's memory tier then holds their rows).
//  9. The load stops; check (the suite fails otherwise): once the follower has applied
//     every shard's newest version, its "train" rows and digest equal the shards'.
// A quick run: --rows_small=100000 --repetitions=1 --min_time=0.5 --warmup=0.5.
// Figure names and what they mean: docs/PERFORMANCE.md, section "Serving".

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/grpc_status.h"
#include "common/ps_client.h"
#include "common/status_macros.h"
#include "ember/v1/ps.grpc.pb.h"
#include "ember/v1/serving.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "tools/bench/cluster_fixtures.h"
#include "tools/bench/figures.h"
#include "tools/bench/serving_cluster.h"
#include "tools/bench/serving_predict.h"
#include "tools/bench/storage_fixtures.h"
#include "tools/bench/suite.h"
#include "tools/bench/zipf.h"
#include "tools/harness/process.h"

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;
using cluster::InFlightRing;
using cluster::Pipeline;
using cluster::PsPullPipeline;
using cluster::PsPushPipeline;
using serving::Call;
using serving::kDim;
using serving::kMemoryBudgetMb;
using serving::kTable;
using serving::ServingCluster;

constexpr char kSuite[] = "serving";
constexpr uint64_t kTableSeed = 0x5e7f1;
constexpr size_t kBatch = 1000;
constexpr int kLoadThreads = 2;
constexpr int kLookupThreads = 2;
constexpr int kProbesPerRepetition = 40;
constexpr int kIdleProbesPerRepetition = 10;
constexpr double kLagP99TargetMs = 1000;
constexpr double kPredictP99TargetMs = 10;     // 100-row Predict batches under load
constexpr size_t kPoolKeys = size_t{1} << 20;  // Zipf keys per thread, reused
// Probe ids are ranks from here on: never drawn by Zipf over R rows nor populated.
constexpr uint64_t kProbeRankBase = uint64_t{1} << 40;
constexpr absl::Duration kProbePoll = absl::Milliseconds(1);
constexpr absl::Duration kProbeTimeout = absl::Seconds(5);
constexpr absl::Duration kProbeEvery = absl::Milliseconds(50);  // on average

void Say(std::string_view message) { Log(kSuite, message); }

// The `q` quantile (nearest rank) of `v`; 0 for none.
double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * v.size()));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

double Median(std::vector<double> v) { return Quantile(std::move(v), 0.5); }

// A PsClient of the cluster that pushes as `worker_id`.
absl::StatusOr<std::unique_ptr<PsClient>> NewClient(const std::string& coordinator,
                                                    uint64_t worker_id) {
  PsClientOptions options;
  options.coordinator_address = coordinator;
  options.worker_id = worker_id;
  options.max_retries = 12;
  options.deadline = absl::Seconds(10);
  return PsClient::Create(options);
}

// One Lookup on the follower. `ids` are packed into `request` (whose table is set);
// INTERNAL unless the answer holds ids * kDim floats.
absl::Status Lookup(v1::ServingService::Stub& stub, absl::Span<const uint64_t> ids,
                    v1::LookupRequest& request, v1::LookupResponse* response) {
  request.set_ids(ids.data(), ids.size() * sizeof(uint64_t));  // little-endian host
  EMBER_RETURN_IF_ERROR(
      Call([&](grpc::ClientContext* c) { return stub.Lookup(c, request, response); }));
  if (response->values().size() != ids.size() * kDim * sizeof(float)) {
    return absl::InternalError(absl::StrCat("Lookup of ", ids.size(), " ids returned ",
                                            response->values().size(), " bytes"));
  }
  return absl::OkStatus();
}

// Lookups of `batch` keys of a stream over `pool` on the follower, one call in flight
// (the ring's depth must be 1): Start takes the keys, Finish makes the call.
class LookupPipeline : public Pipeline {
 public:
  LookupPipeline(v1::ServingService::Stub* stub, const std::vector<uint64_t>* pool)
      : stub_(stub), stream_(pool, kBatch) {
    request_.set_table(kTable);
  }
  absl::Status Start(size_t) override {
    ids_ = stream_.Next();
    return absl::OkStatus();
  }
  absl::Status Finish(size_t) override { return Lookup(*stub_, ids_, request_, &response_); }

 private:
  v1::ServingService::Stub* stub_;
  KeyStream stream_;
  absl::Span<const uint64_t> ids_;
  v1::LookupRequest request_;
  v1::LookupResponse response_;
};

// Runs `step(t)` over and over on each of `threads` threads until Stop (or
// destruction), counting the steps that succeeded and those that failed (a failed step
// is counted and its thread goes on).
class Loop {
 public:
  Loop(int threads, std::function<absl::Status(int)> step) : step_(std::move(step)) {
    for (int t = 0; t < threads; ++t) threads_.emplace_back([this, t] { Run(t); });
  }
  ~Loop() { Stop(); }

  // Stops the threads (each finishes its step) and joins them.
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  int64_t steps() const { return steps_.load(); }
  int64_t failed() const { return failed_.load(); }
  // The first error a step returned (OK if none).
  absl::Status first_error() const {
    absl::MutexLock lock(&mu_);
    return first_error_;
  }

 private:
  void Run(int t) {
    while (!stop_.load()) {
      const absl::Status s = step_(t);
      (s.ok() ? steps_ : failed_).fetch_add(1);
      if (!s.ok()) {
        absl::MutexLock lock(&mu_);
        first_error_.Update(s);
      }
    }
  }

  const std::function<absl::Status(int)> step_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> steps_{0};
  std::atomic<int64_t> failed_{0};
  mutable absl::Mutex mu_;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;  // last: joined (by Stop) before the rest goes
};

// Steps `pipelines` (one thread each, one call in flight) for `seconds`. Returns keys/s
// over all threads. Errors: the first failed call.
absl::StatusOr<double> KeysPerSec(absl::Span<Pipeline* const> pipelines, double seconds) {
  std::vector<std::unique_ptr<InFlightRing>> rings;
  for (Pipeline* p : pipelines) rings.push_back(std::make_unique<InFlightRing>(p, 1));
  const Clock::time_point start = Clock::now();
  Loop loop(static_cast<int>(rings.size()), [&](int t) { return rings[t]->Step(); });
  absl::SleepFor(absl::Seconds(seconds));
  loop.Stop();
  EMBER_RETURN_IF_ERROR(loop.first_error());
  return loop.steps() * static_cast<double>(kBatch) / SecondsSince(start);
}

// The training load: kLoadThreads workers, each a thread with its own PsClient
// (worker_id 1 + t) pulling and then pushing the same 1000 Zipf keys (two streams over
// one pool), until the loop stops.
struct TrainingLoad {
  std::vector<std::unique_ptr<PsClient>> clients;
  std::vector<std::unique_ptr<Pipeline>> pipelines;  // pull, push of worker 0, then 1
  std::vector<std::unique_ptr<InFlightRing>> rings;  // one per pipeline
  std::unique_ptr<Loop> loop;                        // last: stopped before the rest goes

  // REQUIRES: pools->size() == kLoadThreads, each >= kBatch keys; `pools` and `grads`
  // (kBatch * kDim) outlive the load.
  static absl::StatusOr<std::unique_ptr<TrainingLoad>> Start(
      const std::string& coordinator, const std::vector<std::vector<uint64_t>>* pools,
      absl::Span<const float> grads) {
    auto load = std::make_unique<TrainingLoad>();
    for (int t = 0; t < kLoadThreads; ++t) {
      EMBER_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client, NewClient(coordinator, 1 + t));
      const std::vector<uint64_t>* pool = &(*pools)[t];
      load->pipelines.push_back(
          std::make_unique<PsPullPipeline>(client.get(), kTable, kDim, pool, kBatch, 1));
      load->pipelines.push_back(
          std::make_unique<PsPushPipeline>(client.get(), kTable, pool, kBatch, grads, 1));
      load->clients.push_back(std::move(client));
    }
    for (auto& p : load->pipelines)
      load->rings.push_back(std::make_unique<InFlightRing>(p.get(), 1));
    load->loop = std::make_unique<Loop>(kLoadThreads, [raw = load.get()](int t) {
      absl::Status s = raw->rings[2 * t]->Step();
      s.Update(raw->rings[2 * t + 1]->Step());
      return s;
    });
    return load;
  }
};

// Lag samples of `count` probes (step 6 of the header), ids from rank `first_rank`.
struct ProbeResult {
  std::vector<double> lag_ms;
  std::vector<double> push_ms;
  int64_t timed_out = 0;
};

absl::StatusOr<ProbeResult> Probe(PsClient& client, v1::ServingService::Stub& stub, int count,
                                  uint64_t first_rank, uint64_t seed) {
  struct Pending {
    uint64_t id;
    std::string before;  // the id's value before its push
    Clock::time_point acked;
  };
  absl::Mutex mu;                // guards pending and pushed_all
  std::vector<Pending> pending;  // pushed, not yet seen changed
  bool pushed_all = false;
  ProbeResult result;  // lag_ms and timed_out: by the poller; push_ms: by this thread

  // The poller: every kProbePoll, one Lookup of every pending id; an id whose value
  // changed (or that timed out) leaves `pending` with its lag.
  absl::Status polled;
  std::thread poller([&] {
    v1::LookupRequest request;
    request.set_table(kTable);
    v1::LookupResponse response;
    std::vector<Pending> batch;
    std::vector<uint64_t> ids;
    constexpr size_t kRowBytes = kDim * sizeof(float);
    while (true) {
      {
        absl::MutexLock lock(&mu);
        if (pending.empty() && pushed_all) return;
        batch = pending;
      }
      if (!batch.empty()) {
        ids.clear();
        for (const Pending& p : batch) ids.push_back(p.id);
        polled = Lookup(stub, ids, request, &response);
        if (!polled.ok()) return;
        const Clock::time_point now = Clock::now();
        std::vector<uint64_t> resolved;
        for (size_t i = 0; i < batch.size(); ++i) {
          const double lag_ms =
              std::chrono::duration<double, std::milli>(now - batch[i].acked).count();
          const bool changed =
              response.values().compare(i * kRowBytes, kRowBytes, batch[i].before) != 0;
          const bool timed_out = lag_ms >= absl::ToDoubleMilliseconds(kProbeTimeout);
          if (!changed && !timed_out) continue;
          result.lag_ms.push_back(lag_ms);
          result.timed_out += changed ? 0 : 1;
          resolved.push_back(batch[i].id);
        }
        absl::MutexLock lock(&mu);
        std::erase_if(pending, [&](const Pending& p) {
          return std::find(resolved.begin(), resolved.end(), p.id) != resolved.end();
        });
      }
      absl::SleepFor(kProbePoll);
    }
  });

  // This thread: a probe every kProbeEvery on average.
  const absl::Status pushed = [&]() -> absl::Status {
    const std::vector<float> grad(kDim, 0.5f);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> spacing_us(
        absl::ToInt64Microseconds(kProbeEvery) / 2, absl::ToInt64Microseconds(kProbeEvery) * 3 / 2);
    v1::LookupRequest request;
    request.set_table(kTable);
    v1::LookupResponse before;
    for (int i = 0; i < count; ++i) {
      absl::SleepFor(absl::Microseconds(spacing_us(rng)));
      const uint64_t id = IdOfRank(first_rank + static_cast<uint64_t>(i));
      EMBER_RETURN_IF_ERROR(Lookup(stub, {&id, 1}, request, &before));
      const Clock::time_point start = Clock::now();
      EMBER_RETURN_IF_ERROR(client.Push(kTable, {&id, 1}, grad, /*step=*/1 + i));
      const Clock::time_point acked = Clock::now();
      result.push_ms.push_back(std::chrono::duration<double, std::milli>(acked - start).count());
      absl::MutexLock lock(&mu);
      pending.push_back({id, before.values(), acked});
    }
    return absl::OkStatus();
  }();
  {
    absl::MutexLock lock(&mu);
    pushed_all = true;
    if (!pushed.ok()) pending.clear();
  }
  poller.join();
  EMBER_RETURN_IF_ERROR(pushed);
  EMBER_RETURN_IF_ERROR(polled);
  return result;
}

// Lookup keys/s of the follower and Pull keys/s of the shards (step 4 of the header):
// medians over `rounds` rounds of `seconds` each, after `warmup` seconds of each.
struct Throughput {
  double follower = 0;
  double ps = 0;
  double follower_warmup = 0;  // the follower's keys/s during its warm-up
};

absl::StatusOr<Throughput> MeasureLookups(ServingCluster& cluster,
                                          const std::vector<std::vector<uint64_t>>& pools,
                                          int rounds, double seconds, double warmup) {
  std::vector<std::unique_ptr<v1::ServingService::Stub>> stubs;
  std::vector<std::unique_ptr<PsClient>> clients;
  std::vector<std::unique_ptr<Pipeline>> owned;
  std::vector<Pipeline*> follower;
  std::vector<Pipeline*> ps;
  for (int t = 0; t < kLookupThreads; ++t) {
    stubs.push_back(v1::ServingService::NewStub(
        grpc::CreateChannel(cluster.serving->ready_text(), grpc::InsecureChannelCredentials())));
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client,
                           NewClient(cluster.coordinator->ready_text(), 0));
    owned.push_back(std::make_unique<LookupPipeline>(stubs.back().get(), &pools[t]));
    follower.push_back(owned.back().get());
    owned.push_back(std::make_unique<PsPullPipeline>(client.get(), kTable, kDim, &pools[t], kBatch,
                                                     /*slots=*/1));
    ps.push_back(owned.back().get());
    clients.push_back(std::move(client));
  }
  Throughput out;
  if (warmup > 0) {
    EMBER_ASSIGN_OR_RETURN(out.follower_warmup, KeysPerSec(follower, warmup));
    EMBER_RETURN_IF_ERROR(KeysPerSec(ps, warmup).status());
    Say(absl::StrFormat("  warm-up: follower Lookup %.0f keys/s", out.follower_warmup));
  }
  std::vector<double> f, p;
  for (int r = 0; r < rounds; ++r) {
    const bool follower_first = r % 2 == 0;
    for (int half = 0; half < 2; ++half) {
      const bool on_follower = (half == 0) == follower_first;
      EMBER_ASSIGN_OR_RETURN(const double keys_per_sec,
                             KeysPerSec(on_follower ? follower : ps, seconds));
      (on_follower ? f : p).push_back(keys_per_sec);
    }
    Say(absl::StrFormat("  round %d/%d: follower Lookup %.0f keys/s, PS Pull %.0f keys/s", r + 1,
                        rounds, f.back(), p.back()));
  }
  out.follower = Median(f);
  out.ps = Median(p);
  return out;
}

// Pushes every id IdOfRank(0..rows-1) once, kBatch per push, 4 pushes in flight.
// REQUIRES: rows % kBatch == 0.
absl::Status Populate(PsClient& client, int64_t rows, absl::Span<const float> grads) {
  std::vector<uint64_t> ids(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) ids[r] = IdOfRank(static_cast<uint64_t>(r));
  PsPushPipeline pushes(&client, kTable, &ids, kBatch, grads, /*slots=*/4);
  InFlightRing ring(&pushes, 4);
  absl::Status first;
  for (int64_t i = 0; i < rows / static_cast<int64_t>(kBatch) && first.ok(); ++i) {
    first.Update(ring.Step());
  }
  first.Update(ring.Drain());
  return first;
}

// Sum of the follower's rows_applied and lag_versions over the shards.
std::pair<uint64_t, uint64_t> Applied(const v1::ServingStatus& status) {
  uint64_t rows = 0, lag = 0;
  for (const v1::ShardFollowState& s : status.shards()) {
    rows += s.rows_applied();
    lag += s.lag_versions();
  }
  return {rows, lag};
}

absl::StatusOr<Figures> RunServingSuite(const BenchOptions& options) {
  const int64_t rows = std::max<int64_t>(1, options.rows_small / kBatch) * kBatch;
  const int rounds = options.repetitions;
  Figures figures;
  figures.AddString("suite", kSuite);
  figures.AddInt("rows", rows);
  figures.AddInt("dim", kDim);
  figures.AddInt("batch_keys", kBatch);
  figures.AddString("optimizer", "adagrad");
  figures.AddNumber("zipf_s", options.zipf);
  figures.AddInt("load_threads", kLoadThreads);
  figures.AddInt("lookup_threads", kLookupThreads);
  figures.AddInt("memory_budget_mb", kMemoryBudgetMb);
  figures.AddNumber("min_time_s", options.min_time_s);
  figures.AddInt("repetitions", rounds);
  figures.AddNumber("warmup_s", options.warmup_s);
  figures.AddInt("hardware_threads", std::thread::hardware_concurrency());

  const std::string bin = cluster::ExecutableDir();
  if (bin.empty()) return absl::InternalError("cannot read /proc/self/exe");
  for (const char* name :
       {"ember-coordinator", "ember-ps", "ember-serving", "ember-worker", "ember-datagen"}) {
    std::error_code ec;
    if (!std::filesystem::exists(absl::StrCat(bin, "/", name), ec)) {
      return absl::FailedPreconditionError(
          absl::StrCat(bin, "/", name,
                       " not found (build it: ninja -C build ember-coordinator ember-ps "
                       "ember-serving ember-worker ember-datagen)"));
    }
  }

  // Declaration order is teardown order reversed: clients and the load go before the
  // processes, the processes before their scratch directory.
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<BenchDir> dir, BenchDir::Open(""));
  ServingCluster cluster;
  cluster.bin = bin;
  cluster.dir = dir->path();
  EMBER_RETURN_IF_ERROR(cluster.Start());
  const std::string coordinator = cluster.coordinator->ready_text();
  Say(absl::StrFormat("coordinator pid %d at %s; shards 0, 1 pids %d, %d; under %s",
                      cluster.coordinator->pid(), coordinator, cluster.ps[0]->pid(),
                      cluster.ps[1]->pid(), dir->path()));

  // The served model for Predict, first: a short training job on the empty cluster
  // (its checkpoints then hold only its own small tables).
  Clock::time_point start = Clock::now();
  EMBER_ASSIGN_OR_RETURN(const PredictData predict_data,
                         TrainServedModel(bin, coordinator, dir->path(), options.seed));
  figures.AddNumber("served_model_seconds", SecondsSince(start));
  figures.AddInt("predict_test_rows", static_cast<int64_t>(predict_data.lines.size()));
  Say(absl::StrFormat("served model trained (%d steps) in %.1f s", predict_data.steps,
                      SecondsSince(start)));

  // The table and its rows.
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> loader, NewClient(coordinator, 100));
  v1::TableConfig table;
  table.set_name(kTable);
  table.set_dim(kDim);
  table.set_seed(kTableSeed);
  table.mutable_optimizer()->set_kind(v1::OptimizerConfig::ADAGRAD);
  EMBER_RETURN_IF_ERROR(loader->CreateTableEverywhere(table));
  const std::vector<float> grads = RandomGradients(kBatch * kDim, options.seed);
  start = Clock::now();
  EMBER_RETURN_IF_ERROR(Populate(*loader, rows, grads));
  figures.AddNumber("populate_seconds", SecondsSince(start));
  Say(absl::StrFormat("populated %d rows in %.1f s", rows, SecondsSince(start)));
  loader.reset();

  // The follower: bootstrapped from the served model's last checkpoint, it follows the
  // "train" rows from the checkpoint's cut.
  start = Clock::now();
  EMBER_RETURN_IF_ERROR(cluster.StartServing());
  Say(absl::StrFormat("ember-serving pid %d at %s", cluster.serving->pid(),
                      cluster.serving->ready_text()));
  EMBER_RETURN_IF_ERROR(cluster.WaitCaughtUp());
  EMBER_ASSIGN_OR_RETURN(const v1::ServingStatus serving_status, cluster.FollowerStatus());
  if (serving_status.version().dense_step() != predict_data.steps) {
    return absl::InternalError(absl::StrCat("the follower serves ",
                                            serving_status.version().DebugString(),
                                            ", not the served model's last checkpoint"));
  }
  figures.AddNumber("follower_catchup_seconds", SecondsSince(start));
  Say(absl::StrFormat("follower caught up with %d rows in %.1f s", rows, SecondsSince(start)));

  // Idle freshness and throughput.
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> prober, NewClient(coordinator, 3));
  const int idle_probes = kIdleProbesPerRepetition * rounds;
  EMBER_ASSIGN_OR_RETURN(const ProbeResult idle, Probe(*prober, *cluster.serving_stub, idle_probes,
                                                       kProbeRankBase, options.seed + 5));
  figures.AddNumber("lag_idle_p50_ms", Quantile(idle.lag_ms, 0.5));
  figures.AddNumber("lag_idle_p99_ms", Quantile(idle.lag_ms, 0.99));
  figures.AddInt("idle_probes", idle_probes);
  Say(absl::StrFormat("idle: %d probes, lag p50 %.1f ms, p99 %.1f ms", idle_probes,
                      Quantile(idle.lag_ms, 0.5), Quantile(idle.lag_ms, 0.99)));

  // Zipf key pools: one per lookup thread (the follower and the PS read the same keys)
  // and one per worker.
  std::vector<std::vector<uint64_t>> lookup_pools;
  std::vector<std::vector<uint64_t>> load_pools;
  for (int t = 0; t < kLookupThreads + kLoadThreads; ++t) {
    EMBER_ASSIGN_OR_RETURN(std::vector<uint64_t> pool,
                           ZipfIds(rows, options.zipf, kPoolKeys, options.seed + 10 + t));
    (t < kLookupThreads ? lookup_pools : load_pools).push_back(std::move(pool));
  }
  Say(absl::StrFormat("idle Lookup vs Pull: %d threads, %d rounds of %.1f s each", kLookupThreads,
                      rounds, options.min_time_s));
  EMBER_ASSIGN_OR_RETURN(
      const Throughput idle_rate,
      MeasureLookups(cluster, lookup_pools, rounds, options.min_time_s, options.warmup_s));
  figures.AddNumber("lookup_keys_per_sec_follower_cold", idle_rate.follower_warmup);
  figures.AddNumber("lookup_keys_per_sec_follower", idle_rate.follower);
  figures.AddNumber("pull_keys_per_sec_ps", idle_rate.ps);
  figures.AddNumber("ratio_follower_vs_ps", idle_rate.follower / idle_rate.ps);

  // Idle Predict (after one pass over the test lines).
  Say("Predict without load");
  start = Clock::now();
  EMBER_RETURN_IF_ERROR(WarmUpPredict(*cluster.serving_stub, predict_data));
  figures.AddNumber("predict_warmup_seconds", SecondsSince(start));
  for (const int batch_rows : {1, 100}) {
    EMBER_RETURN_IF_ERROR(MeasurePredict(*cluster.serving_stub, predict_data, batch_rows,
                                         options.min_time_s, absl::StrCat(batch_rows, "row_idle"),
                                         &figures));
  }

  // Under load: freshness, then throughput.
  const std::vector<float> load_grads = RandomGradients(kBatch * kDim, options.seed + 1);
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<TrainingLoad> load,
                         TrainingLoad::Start(coordinator, &load_pools, load_grads));
  Say(absl::StrFormat("load running: %d workers; warm-up %.1f s", kLoadThreads, options.warmup_s));
  absl::SleepFor(absl::Seconds(options.warmup_s));
  const int probes = kProbesPerRepetition * rounds;
  EMBER_ASSIGN_OR_RETURN(const uint64_t versions_before, cluster.PsVersions());
  EMBER_ASSIGN_OR_RETURN(const v1::ServingStatus status_before, cluster.FollowerStatus());
  const int64_t steps_before = load->loop->steps();
  start = Clock::now();
  EMBER_ASSIGN_OR_RETURN(const ProbeResult loaded,
                         Probe(*prober, *cluster.serving_stub, probes, kProbeRankBase + idle_probes,
                               options.seed + 6));
  const double window = SecondsSince(start);
  const int64_t steps = load->loop->steps() - steps_before;
  EMBER_ASSIGN_OR_RETURN(const uint64_t versions_after, cluster.PsVersions());
  EMBER_ASSIGN_OR_RETURN(const v1::ServingStatus status_after, cluster.FollowerStatus());
  const double lag_p99 = Quantile(loaded.lag_ms, 0.99);
  figures.AddNumber("lag_p50_ms", Quantile(loaded.lag_ms, 0.5));
  figures.AddNumber("lag_p99_ms", lag_p99);
  figures.AddNumber("lag_max_ms", Quantile(loaded.lag_ms, 1.0));
  figures.AddInt("probes", probes);
  figures.AddInt("probes_timed_out", loaded.timed_out);
  figures.AddNumber("lag_p99_target_ms", kLagP99TargetMs);
  figures.AddBool("lag_p99_met", lag_p99 < kLagP99TargetMs);
  figures.AddNumber("probe_push_p50_ms", Median(loaded.push_ms));
  figures.AddNumber("load_steps_per_sec", steps / window);
  figures.AddNumber("load_pushed_keys_per_sec", steps * static_cast<double>(kBatch) / window);
  figures.AddNumber("ps_versions_per_sec", (versions_after - versions_before) / window);
  figures.AddNumber("follower_rows_applied_per_sec",
                    (Applied(status_after).first - Applied(status_before).first) / window);
  figures.AddInt("follower_lag_versions_end", static_cast<int64_t>(Applied(status_after).second));
  double lag_seconds_end = 0;
  for (const v1::ShardFollowState& s : status_after.shards()) {
    lag_seconds_end = std::max(lag_seconds_end, s.lag_seconds());
  }
  figures.AddNumber("follower_lag_seconds_end", lag_seconds_end);
  Say(absl::StrFormat(
      "under load (%.0f steps/s): %d probes in %.1f s, lag p50 %.1f ms, p99 %.1f ms, max %.1f ms, "
      "%d timed out; shards %.0f versions/s, follower applied %.0f rows/s",
      steps / window, probes, window, Quantile(loaded.lag_ms, 0.5), lag_p99,
      Quantile(loaded.lag_ms, 1.0), loaded.timed_out, (versions_after - versions_before) / window,
      (Applied(status_after).first - Applied(status_before).first) / window));

  Say("Lookup vs Pull under load");
  EMBER_ASSIGN_OR_RETURN(const Throughput loaded_rate,
                         MeasureLookups(cluster, lookup_pools, rounds, options.min_time_s,
                                        /*warmup=*/0));
  figures.AddNumber("lookup_keys_per_sec_follower_loaded", loaded_rate.follower);
  figures.AddNumber("pull_keys_per_sec_ps_loaded", loaded_rate.ps);
  figures.AddNumber("ratio_follower_vs_ps_loaded", loaded_rate.follower / loaded_rate.ps);

  Say("Predict under load");
  for (const int batch_rows : {1, 100}) {
    EMBER_RETURN_IF_ERROR(MeasurePredict(*cluster.serving_stub, predict_data, batch_rows,
                                         options.min_time_s, absl::StrCat(batch_rows, "row_loaded"),
                                         &figures));
  }
  figures.AddNumber("predict_p99_target_ms_100row", kPredictP99TargetMs);
  figures.AddBool(
      "predict_p99_met_100row",
      figures.Number("predict_p99_ms_100row_loaded").value_or(1e9) < kPredictP99TargetMs);
  load->loop->Stop();
  figures.AddInt("failed_load_steps", load->loop->failed());
  if (load->loop->failed() > 0) {
    Say(absl::StrCat(load->loop->failed(),
                     " load steps failed; first: ", load->loop->first_error().ToString()));
  }

  // Check: the follower holds exactly the shards' rows.
  start = Clock::now();
  EMBER_RETURN_IF_ERROR(cluster.WaitCaughtUp());
  Say(absl::StrFormat("follower caught up %.2f s after the load stopped", SecondsSince(start)));
  EMBER_ASSIGN_OR_RETURN(const auto shard_digests, prober->Checksum(kTable));
  EMBER_ASSIGN_OR_RETURN(const PsClient::TableDigest follower, cluster.FollowerDigest());
  const auto it = shard_digests.find(kTable);
  const PsClient::TableDigest shards =
      it == shard_digests.end() ? PsClient::TableDigest{} : it->second;
  if (shards.rows != follower.rows || shards.digest != follower.digest) {
    return absl::DataLossError(absl::StrFormat(
        "follower differs from the shards: %d rows, digest %016x vs %d rows, digest %016x",
        follower.rows, follower.digest, shards.rows, shards.digest));
  }
  figures.AddBool("checks_passed", true);
  Say(absl::StrFormat("checks passed: follower and shards hold %d rows, digest %016x", shards.rows,
                      shards.digest));
  return figures;
}

}  // namespace

EMBER_BENCH_SUITE(serving,
                  "freshness and Lookup speed of an ember-serving follower under a training "
                  "load (starts a coordinator, 2 shards and a follower)",
                  RunServingSuite);

}  // namespace ember::bench
