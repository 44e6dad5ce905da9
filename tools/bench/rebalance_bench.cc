// Copyright 2026 The Ember Authors.
//
// `ember-bench rebalance`: an online slot migration (server/coordinator/slot_migrator.h)
// onto a new, empty shard while a training-like load keeps pulling and pushing.
//
// Scenario (every figure from this one run):
//  1. Cluster on loopback, processes found next to ember-bench and stopped however the
//     suite ends: ember-coordinator (--expected_shards=2, an admin token,
//     --heartbeat_timeout_ms=3000) and shards 0 and 1 (ember-ps, --memory_budget_mb=256,
//     WAL on as in production, data dirs in a scratch directory removed at the end).
//     Tables, dim 16, Adagrad: "train" with R = --rows_small rows (default 1M) and
//     "audit" with R / 10 rows, each populated by pushing every id (IdOfRank(0..n-1))
//     once in 1000-key batches. Then shard 2 starts and registers with no slots.
//  2. Load ("training"): 2 threads, each with its own PsClient (through the
//     coordinator; worker_id 1 and 2, max_retries 12, deadline 5 s). A step pulls
//     1000 keys of "train" drawn Zipf(--zipf, default 1.1) over the R ids, then pushes
//     gradients for the same keys. By convention a step is one batch of 256 examples
//     (~4 ids per example, deduplicated), so examples/s = 256 x steps/s. Every call's
//     start and end are recorded; a failed call is counted and the thread goes on.
//     "audit" gets no load: it is the control whose digest must not change.
//  3. Baseline: --warmup seconds (default 2) of load, then a window of
//     10 x --min_time seconds (default 10 s).
//  4. Right after, with the load running: PlanRebalance(by SLOTS), StartMigration of
//     the plan's spec (unthrottled), GetMigration every 100 ms until DONE. The
//     migration window runs from StartMigration to the first poll that sees DONE.
//     FAILED or CANCELLED fails the suite.
//     Then a window as long as the baseline with nothing moving (the "after" figures).
//  5. Still under load: the same slots back, throttled to kThrottleBytesPerSec
//     (4 MB/s): PlanRebalance draining shard 2, then as in 4.
//  6. The load stops; checks (each failure fails the suite): every slot is owned by
//     shard 0 or 1, every slot of the drain plan by its target and shard 2 holds no
//     row; the "audit" digest
//     summed over the shards (PsService.Checksum, which flushes) equals the one taken
//     before the load started; "train" still has exactly R rows. ("train"'s digest
//     changes during the move by design: the load pushes to it.)
// A quick run: --rows_small=100000 --min_time=0.3 --warmup=0.5.
//
// Figures (besides the parameters: rows, audit_rows, dim, batch_keys, optimizer,
// zipf_s, examples_per_step, load_threads, memory_budget_mb, baseline_seconds,
// warmup_s, hardware_threads):
//   populate_seconds                 loading both tables into shards 0 and 1
//   migration_moves                  moves of the operation (planned moves split at
//                                    1024 slots); slots_moved: slots that changed owner
//   migration_rows, migration_bytes  Migration.rows_copied / bytes_copied: rows of both
//                                    tables copied, snapshot + catch-up, all moves
//   migration_seconds                Migration.seconds (the coordinator's running time)
//   migration_wall_seconds           StartMigration to the poll that saw DONE
//   migration_rows_per_sec           migration_rows / migration_seconds
//   migration_mb_per_sec             migration_bytes / 1e6 / migration_seconds
//   migration_restarts               Migration.restarts (copies started over)
//   max_fence_ms                     Migration.max_fence_ms: longest time a source had
//                                    slots fenced (their calls answered UNAVAILABLE)
//   max_pause_ms                     longest single Pull or Push (PsClient call, retries
//                                    and redirects included) overlapping the migration
//                                    window: the pause a trainer sees
//   baseline_max_call_ms             the same over the baseline window
//   pause_vs_baseline_max_call       max_pause_ms / baseline_max_call_ms
//   baseline_p99_call_ms, during_p99_call_ms   99th percentile call time of each window
//   examples_per_sec_before          256 x steps completed in the baseline window / its length
//   examples_per_sec_during          the same over the migration window
//   examples_per_sec_during_vs_before  the ratio of the two; _target 0.7 (issue 25) and
//                                    _met (ratio >= target)
//   examples_per_sec_after           the same over a window as long as the baseline's
//                                    right after the move (three shards, nothing
//                                    moving); _after_vs_before, during_vs_after: what
//                                    the new topology costs, and what the copy does
//   failed_calls                     Pull/Push calls that returned an error (any window)
//   throttled_*                      the drain of step 5: bytes_per_sec (the throttle),
//                                    rows, seconds, mb_per_sec, max_fence_ms,
//                                    max_pause_ms, examples_per_sec_during_vs_before
//   rows_per_shard_after, slots_per_shard_after  "train" rows (Checksum) and owned slots
//                                    of shards 0,1,2 after both moves
//   rows_max_over_mean_after         largest shard's "train" rows over the mean of the
//                                    shards that own slots
//   background_priorities            --background_priorities (the shards' defaults; false:
//                                    compaction and the copy at normal priority)
//   compaction_priority              the shards' --compaction_priority ("default": not given)
//   migration_copy_priority          the shards' --migration_copy_priority (the same)
//   checks_passed                    true (the suite fails otherwise)

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "common/ps_client.h"
#include "common/ps_client_cluster.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "ember/v1/admin.grpc.pb.h"
#include "ember/v1/coordinator.grpc.pb.h"
#include "ember/v1/ps.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "tools/bench/cluster_fixtures.h"
#include "tools/bench/figures.h"
#include "tools/bench/storage_fixtures.h"
#include "tools/bench/suite.h"
#include "tools/bench/zipf.h"
#include "tools/harness/process.h"

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kSuite[] = "rebalance";
constexpr char kTrain[] = "train";
constexpr char kAudit[] = "audit";
constexpr size_t kDim = 16;
constexpr size_t kBatch = 1000;
constexpr int kExamplesPerStep = 256;
constexpr int kLoadThreads = 2;
constexpr int kMemoryBudgetMb = 256;
// Training under a rebalance keeps at least this share of its speed (issue 25).
constexpr double kDuringVsBeforeTarget = 0.7;
constexpr char kAdminToken[] = "ember-bench-rebalance";
constexpr double kBaselinePerMinTime = 10;     // baseline window = 10 x --min_time
constexpr size_t kPoolKeys = size_t{1} << 20;  // Zipf keys per load thread, reused
constexpr absl::Duration kStartTimeout = absl::Seconds(30);
constexpr absl::Duration kRpcDeadline = absl::Seconds(10);
constexpr absl::Duration kMigrationBound = absl::Seconds(120);
constexpr absl::Duration kPollEvery = absl::Milliseconds(100);
// The throttle of the second (drain) migration.
constexpr uint64_t kThrottleBytesPerSec = 4'000'000;

void Say(std::string_view message) { Log(kSuite, message); }

v1::TableConfig Table(const std::string& name, uint64_t seed) {
  v1::TableConfig config;
  config.set_name(name);
  config.set_dim(kDim);
  config.set_seed(seed);
  config.mutable_optimizer()->set_kind(v1::OptimizerConfig::ADAGRAD);
  return config;
}

// A unary call with a deadline (and the admin token when `admin`), as absl::Status.
template <typename Stub, typename Method, typename Request, typename Response>
absl::Status Call(Stub& stub, Method method, const Request& request, Response* response,
                  bool admin = false) {
  grpc::ClientContext context;
  if (admin) context.AddMetadata("ember-admin-token", kAdminToken);
  context.set_deadline(absl::ToChronoTime(absl::Now() + kRpcDeadline));
  const grpc::Status s = (stub.*method)(&context, request, response);
  return FromGrpcStatus(s, &context);
}

// Polls `done` every 50 ms until it returns true or `bound` passes (DEADLINE_EXCEEDED
// naming `what`).
template <typename Fn>
absl::Status PollUntil(Fn done, absl::Duration bound, const std::string& what) {
  const absl::Time end = absl::Now() + bound;
  while (!done()) {
    if (absl::Now() > end) {
      return absl::DeadlineExceededError(absl::StrCat("timed out waiting for ", what));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::OkStatus();
}

// One Pull or Push of the load, in seconds since the load's origin.
struct CallRecord {
  double start;
  double end;
  bool ok;
};

// The training load: kLoadThreads threads, each with its own PsClient, pulling and
// pushing Zipf batches of "train" until Stop (or destruction).
class TrainingLoad {
 public:
  // REQUIRES: each pool has >= kBatch keys; `grads` has kBatch * kDim values.
  static absl::StatusOr<std::unique_ptr<TrainingLoad>> Start(
      const std::string& coordinator, std::vector<std::vector<uint64_t>> pools,
      std::vector<float> grads) {
    auto load = std::unique_ptr<TrainingLoad>(new TrainingLoad(std::move(grads)));
    load->pools_ = std::move(pools);
    for (int t = 0; t < kLoadThreads; ++t) {
      PsClientOptions options;
      options.coordinator_address = coordinator;
      options.worker_id = 1 + t;
      options.max_retries = 12;
      options.deadline = absl::Seconds(5);
      // The client takes the map, the shards and the tables from the coordinator.
      EMBER_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client, PsClient::Create(options));
      load->clients_.push_back(std::move(client));
    }
    load->calls_.resize(kLoadThreads);
    load->steps_.resize(kLoadThreads);
    load->first_error_.resize(kLoadThreads);
    for (int t = 0; t < kLoadThreads; ++t) {
      load->threads_.emplace_back([raw = load.get(), t] { raw->Run(t); });
    }
    return load;
  }

  ~TrainingLoad() { Stop(); }

  // Stops the threads (each finishes its current call) and joins them.
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  // Seconds since the load's origin.
  double Now() const { return std::chrono::duration<double>(Clock::now() - origin_).count(); }
  int64_t steps_done() const { return steps_done_.load(); }

  // After Stop: every call and step end (seconds since origin), over all threads.
  std::vector<CallRecord> Calls() const {
    std::vector<CallRecord> all;
    for (const auto& c : calls_) all.insert(all.end(), c.begin(), c.end());
    return all;
  }
  std::vector<double> StepEnds() const {
    std::vector<double> all;
    for (const auto& s : steps_) all.insert(all.end(), s.begin(), s.end());
    return all;
  }
  // After Stop: the first error a thread saw, if any.
  absl::Status FirstError() const {
    for (const absl::Status& s : first_error_) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  explicit TrainingLoad(std::vector<float> grads)
      : grads_(std::move(grads)), origin_(Clock::now()) {}

  void Run(int t) {
    PsClient& client = *clients_[t];
    KeyStream stream(&pools_[t], kBatch);
    std::vector<float> rows(kBatch * kDim);
    std::vector<CallRecord>& calls = calls_[t];
    int64_t step = 0;
    auto record = [&](double start, const absl::Status& s) {
      calls.push_back({start, Now(), s.ok()});
      if (!s.ok() && first_error_[t].ok()) first_error_[t] = s;
      return s.ok();
    };
    while (!stop_) {
      const absl::Span<const uint64_t> ids = stream.Next();
      double start = Now();
      const bool pulled = record(start, client.Pull(kTrain, ids, absl::MakeSpan(rows)));
      start = Now();
      const bool pushed = record(start, client.Push(kTrain, ids, grads_, ++step));
      if (pulled && pushed) {
        steps_[t].push_back(Now());
        ++steps_done_;
      }
    }
  }

  std::vector<float> grads_;
  Clock::time_point origin_;
  std::vector<std::vector<uint64_t>> pools_;
  std::vector<std::unique_ptr<PsClient>> clients_;
  // Per thread, written only by that thread until Stop joins it.
  std::vector<std::vector<CallRecord>> calls_;
  std::vector<std::vector<double>> steps_;
  std::vector<absl::Status> first_error_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> steps_done_{0};
  std::vector<std::thread> threads_;  // last: joined (by Stop) before the rest goes
};

// What the load did within [begin, end] (seconds since its origin).
struct Window {
  double seconds = 0;
  int64_t steps = 0;
  double max_call_ms = 0;
  double p99_call_ms = 0;
};

Window Summarize(const std::vector<CallRecord>& calls, const std::vector<double>& step_ends,
                 double begin, double end) {
  Window w;
  w.seconds = end - begin;
  for (double t : step_ends) w.steps += (t >= begin && t <= end) ? 1 : 0;
  std::vector<double> ms;
  for (const CallRecord& c : calls) {
    if (c.end < begin || c.start > end) continue;  // calls overlapping the window
    ms.push_back((c.end - c.start) * 1e3);
  }
  if (!ms.empty()) {
    std::sort(ms.begin(), ms.end());
    w.max_call_ms = ms.back();
    w.p99_call_ms = ms[std::min(ms.size() - 1, static_cast<size_t>(0.99 * ms.size()))];
  }
  return w;
}

// The running cluster: coordinator, shards and the stubs the suite calls directly.
struct Cluster {
  std::string bin;
  std::string dir;
  std::vector<std::string> priority_flags;  // empty: the servers' defaults
  std::unique_ptr<Process> coordinator;
  std::vector<std::unique_ptr<Process>> ps;  // index = shard id
  std::unique_ptr<v1::AdminService::Stub> admin;
  std::unique_ptr<v1::CoordinatorService::Stub> coordinator_stub;
  std::vector<std::unique_ptr<v1::PsService::Stub>> ps_stubs;

  ~Cluster() {
    // Scratch data: no graceful flush of the shards' dirty rows.
    for (auto& p : ps) {
      if (p != nullptr) p->Kill().IgnoreError();
    }
    if (coordinator != nullptr) coordinator->Stop(absl::Seconds(5)).IgnoreError();
  }

  absl::Status StartCoordinator() {
    EMBER_ASSIGN_OR_RETURN(
        coordinator, Process::Start(bin + "/ember-coordinator",
                                    {absl::StrCat("--data_dir=", dir, "/coordinator"), "--port=0",
                                     "--expected_shards=2", "--heartbeat_timeout_ms=3000",
                                     absl::StrCat("--admin_token=", kAdminToken)},
                                    "listening on ", kStartTimeout));
    auto channel =
        grpc::CreateChannel(coordinator->ready_text(), grpc::InsecureChannelCredentials());
    admin = v1::AdminService::NewStub(channel);
    coordinator_stub = v1::CoordinatorService::NewStub(channel);
    return absl::OkStatus();
  }

  absl::Status StartPs(uint32_t id) {
    std::vector<std::string> args = {absl::StrCat("--data_dir=", dir, "/ps-", id), "--port=0",
                                     absl::StrCat("--shard_id=", id),
                                     absl::StrCat("--coordinator=", coordinator->ready_text()),
                                     absl::StrCat("--memory_budget_mb=", kMemoryBudgetMb)};
    args.insert(args.end(), priority_flags.begin(), priority_flags.end());
    EMBER_ASSIGN_OR_RETURN(
        std::unique_ptr<Process> p,
        Process::Start(bin + "/ember-ps", std::move(args), "listening on ", kStartTimeout));
    ps_stubs.push_back(v1::PsService::NewStub(
        grpc::CreateChannel(p->ready_text(), grpc::InsecureChannelCredentials())));
    ps.push_back(std::move(p));
    return absl::OkStatus();
  }

  absl::StatusOr<ClusterMap> Map() {
    return FetchClusterMap(*coordinator_stub, absl::Now() + kRpcDeadline);
  }

  // `table`'s (rows, digest) on each shard, in shard order (Checksum flushes first).
  absl::StatusOr<std::vector<PsClient::TableDigest>> Checksums(const std::string& table) {
    std::vector<PsClient::TableDigest> out;
    for (size_t i = 0; i < ps_stubs.size(); ++i) {
      v1::ChecksumRequest request;
      request.set_table(table);
      v1::ChecksumResponse response;
      const absl::Status s = Call(*ps_stubs[i], &v1::PsService::Stub::Checksum, request, &response);
      if (!s.ok())
        return absl::Status(s.code(), absl::StrCat("Checksum on shard ", i, ": ", s.message()));
      if (response.tables_size() != 1) {
        return absl::InternalError(
            absl::StrCat("Checksum on shard ", i, ": ", response.tables_size(), " tables"));
      }
      out.push_back({response.tables(0).rows(), response.tables(0).digest()});
    }
    return out;
  }
};

PsClient::TableDigest Sum(const std::vector<PsClient::TableDigest>& digests) {
  PsClient::TableDigest sum;
  for (const auto& d : digests) {
    sum.rows += d.rows;
    sum.digest += d.digest;  // mod 2^64, as the shards' digests add up
  }
  return sum;
}

// Pushes every id IdOfRank(0..rows-1) of `table` once, kBatch per push, 4 in flight.
absl::Status PopulateTable(PsClient& client, const std::string& table, int64_t rows,
                           absl::Span<const float> grads) {
  constexpr size_t kInFlight = 4;
  std::vector<std::vector<uint64_t>> ids(kInFlight);
  std::vector<PsHandle> handles;  // handles[i] pushes ids[i]
  absl::Status first;
  size_t slot = 0;
  for (int64_t begin = 0; begin < rows; begin += kBatch, slot = (slot + 1) % kInFlight) {
    if (slot < handles.size()) first.Update(handles[slot].Wait());  // its previous push
    const int64_t n = std::min<int64_t>(kBatch, rows - begin);
    ids[slot].resize(n);
    for (int64_t i = 0; i < n; ++i) ids[slot][i] = IdOfRank(static_cast<uint64_t>(begin + i));
    PsHandle h = client.PushAsync(table, ids[slot], grads.subspan(0, n * kDim), /*step=*/0);
    if (slot < handles.size()) {
      handles[slot] = std::move(h);
    } else {
      handles.push_back(std::move(h));
    }
  }
  first.Update(WaitAll(&handles));
  return first;
}

// Starts `spec` (with the load running) and polls it until DONE; *begin and *end get
// the load clock at the start and at the poll that saw DONE. FAILED, CANCELLED or no
// end within kMigrationBound fail.
absl::StatusOr<v1::Migration> MigrateUnderLoad(Cluster& cluster, const TrainingLoad& load,
                                               const v1::MigrationSpec& spec, double* begin,
                                               double* end) {
  v1::StartMigrationRequest start_request;
  *start_request.mutable_spec() = spec;
  *begin = load.Now();
  v1::Migration op;
  EMBER_RETURN_IF_ERROR(
      Call(*cluster.admin, &v1::AdminService::Stub::StartMigration, start_request, &op, true));
  Say(absl::StrFormat("migration %s started: %d moves, %d bytes/s", op.op_id(),
                      op.spec().moves_size(), spec.bytes_per_sec()));
  const absl::Time give_up = absl::Now() + kMigrationBound;
  v1::Migration::Phase last_phase = op.phase();
  while (op.phase() != v1::Migration::DONE) {
    if (op.phase() == v1::Migration::FAILED || op.phase() == v1::Migration::CANCELLED) {
      return absl::AbortedError(absl::StrCat("migration ", op.op_id(), " ended ",
                                             v1::Migration::Phase_Name(op.phase()), ": ",
                                             op.error()));
    }
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(absl::StrCat(
          "migration ", op.op_id(), " not done after ", absl::FormatDuration(kMigrationBound),
          "; phase ", v1::Migration::Phase_Name(op.phase())));
    }
    absl::SleepFor(kPollEvery);
    v1::GetMigrationRequest get;
    get.set_op_id(op.op_id());
    v1::Migration polled;
    const absl::Status s =
        Call(*cluster.admin, &v1::AdminService::Stub::GetMigration, get, &polled, true);
    if (!s.ok()) {
      Say(absl::StrCat("GetMigration: ", s.ToString(), " (retrying)"));
      continue;
    }
    op = std::move(polled);
    if (op.phase() != last_phase) {
      Say(absl::StrFormat("  %s, move %d/%d, %d rows copied", v1::Migration::Phase_Name(op.phase()),
                          std::min<int>(op.move() + 1, op.spec().moves_size()),
                          op.spec().moves_size(), op.rows_copied()));
      last_phase = op.phase();
    }
  }
  *end = load.Now();
  Say(absl::StrFormat("migration %s done in %.2f s: %d rows, %d bytes, max fence %.1f ms",
                      op.op_id(), op.seconds(), op.rows_copied(), op.bytes_copied(),
                      op.max_fence_ms()));
  return op;
}

absl::StatusOr<Figures> RunRebalanceSuite(const BenchOptions& options) {
  const int64_t rows = options.rows_small;
  const int64_t audit_rows = std::max<int64_t>(1000, rows / 10);
  const double baseline_s = kBaselinePerMinTime * options.min_time_s;
  Figures figures;
  figures.AddString("suite", kSuite);
  figures.AddInt("rows", rows);
  figures.AddInt("audit_rows", audit_rows);
  figures.AddInt("dim", kDim);
  figures.AddInt("batch_keys", kBatch);
  figures.AddString("optimizer", "adagrad");
  figures.AddNumber("zipf_s", options.zipf);
  figures.AddInt("examples_per_step", kExamplesPerStep);
  figures.AddInt("load_threads", kLoadThreads);
  figures.AddBool("background_priorities", options.background_priorities);
  figures.AddString(
      "compaction_priority",
      options.background_priorities
          ? (options.compaction_priority.empty() ? "default" : options.compaction_priority)
          : "normal");
  figures.AddString(
      "migration_copy_priority",
      options.background_priorities
          ? (options.migration_copy_priority.empty() ? "default" : options.migration_copy_priority)
          : "normal");
  figures.AddInt("memory_budget_mb", kMemoryBudgetMb);
  figures.AddNumber("baseline_seconds", baseline_s);
  figures.AddNumber("warmup_s", options.warmup_s);
  figures.AddInt("hardware_threads", std::thread::hardware_concurrency());

  const std::string bin = cluster::ExecutableDir();
  if (bin.empty()) return absl::InternalError("cannot read /proc/self/exe");
  for (const char* name : {"ember-coordinator", "ember-ps"}) {
    std::error_code ec;
    if (!std::filesystem::exists(absl::StrCat(bin, "/", name), ec)) {
      return absl::FailedPreconditionError(absl::StrCat(
          bin, "/", name, " not found (build it: ninja -C build ember-coordinator ember-ps)"));
    }
  }

  // Declaration order is teardown order reversed: the load's clients go before the
  // processes, the processes before their scratch directory.
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<BenchDir> dir, BenchDir::Open(""));
  Cluster cluster;
  cluster.bin = bin;
  cluster.dir = dir->path();
  if (!options.background_priorities) {
    cluster.priority_flags = {"--compaction_priority=normal", "--migration_copy_priority=normal"};
  } else {
    if (!options.compaction_priority.empty()) {
      cluster.priority_flags.push_back("--compaction_priority=" + options.compaction_priority);
    }
    if (!options.migration_copy_priority.empty()) {
      cluster.priority_flags.push_back("--migration_copy_priority=" +
                                       options.migration_copy_priority);
    }
  }
  EMBER_RETURN_IF_ERROR(cluster.StartCoordinator());
  EMBER_RETURN_IF_ERROR(cluster.StartPs(0));
  EMBER_RETURN_IF_ERROR(cluster.StartPs(1));
  Say(absl::StrFormat("coordinator pid %d at %s; shards 0, 1 pids %d, %d; under %s",
                      cluster.coordinator->pid(), cluster.coordinator->ready_text(),
                      cluster.ps[0]->pid(), cluster.ps[1]->pid(), dir->path()));
  EMBER_RETURN_IF_ERROR(PollUntil(
      [&] {
        for (auto& stub : cluster.ps_stubs) {
          v1::GetShardInfoResponse info;
          if (!Call(*stub, &v1::PsService::Stub::GetShardInfo, v1::GetShardInfoRequest(), &info)
                   .ok() ||
              info.epoch() == 0) {
            return false;
          }
        }
        return cluster.Map().ok();
      },
      kStartTimeout, "shards 0 and 1 to serve the first slot map"));

  // Tables and rows.
  PsClientOptions loader_options;
  loader_options.coordinator_address = cluster.coordinator->ready_text();
  loader_options.worker_id = 100;
  loader_options.max_retries = 12;
  loader_options.deadline = absl::Seconds(30);
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> loader, PsClient::Create(loader_options));
  EMBER_RETURN_IF_ERROR(loader->CreateTableEverywhere(Table(kTrain, 0x7a1e)));
  EMBER_RETURN_IF_ERROR(loader->CreateTableEverywhere(Table(kAudit, 0xa0d1)));
  const std::vector<float> grads = RandomGradients(kBatch * kDim, options.seed);
  auto start = Clock::now();
  EMBER_RETURN_IF_ERROR(PopulateTable(*loader, kTrain, rows, grads));
  EMBER_RETURN_IF_ERROR(PopulateTable(*loader, kAudit, audit_rows, grads));
  EMBER_ASSIGN_OR_RETURN(const std::vector<PsClient::TableDigest> train_before,
                         cluster.Checksums(kTrain));
  EMBER_ASSIGN_OR_RETURN(const std::vector<PsClient::TableDigest> audit_before_shards,
                         cluster.Checksums(kAudit));
  figures.AddNumber("populate_seconds", SecondsSince(start));
  const PsClient::TableDigest audit_before = Sum(audit_before_shards);
  Say(absl::StrFormat("populated %d + %d rows in %.1f s (train rows per shard %d, %d)", rows,
                      audit_rows, SecondsSince(start), train_before[0].rows, train_before[1].rows));
  if (Sum(train_before).rows != static_cast<uint64_t>(rows) ||
      audit_before.rows != static_cast<uint64_t>(audit_rows)) {
    return absl::InternalError(absl::StrCat("after population the shards hold ",
                                            Sum(train_before).rows, " train rows and ",
                                            audit_before.rows, " audit rows"));
  }

  // The new shard: registered, alive, with both tables.
  EMBER_RETURN_IF_ERROR(cluster.StartPs(2));
  EMBER_RETURN_IF_ERROR(PollUntil(
      [&] {
        v1::ListShardsResponse shards;
        if (!Call(*cluster.admin, &v1::AdminService::Stub::ListShards, v1::ListShardsRequest(),
                  &shards, true)
                 .ok()) {
          return false;
        }
        bool alive = false;
        for (const v1::ShardInfo& s : shards.shards()) {
          alive |= s.shard_id() == 2 && s.state() == v1::ShardInfo::ALIVE;
        }
        v1::GetShardInfoResponse info;
        return alive &&
               Call(*cluster.ps_stubs[2], &v1::PsService::Stub::GetShardInfo,
                    v1::GetShardInfoRequest(), &info)
                   .ok() &&
               info.tables_size() == 2;
      },
      kStartTimeout, "shard 2 to register with both tables"));
  Say(absl::StrFormat("shard 2 pid %d at %s registered (no slots)", cluster.ps[2]->pid(),
                      cluster.ps[2]->ready_text()));

  // The load.
  std::vector<std::vector<uint64_t>> pools;
  for (int t = 0; t < kLoadThreads; ++t) {
    EMBER_ASSIGN_OR_RETURN(std::vector<uint64_t> pool,
                           ZipfIds(rows, options.zipf, kPoolKeys, options.seed + 10 + t));
    pools.push_back(std::move(pool));
  }
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<TrainingLoad> load,
                         TrainingLoad::Start(cluster.coordinator->ready_text(), std::move(pools),
                                             RandomGradients(kBatch * kDim, options.seed + 1)));
  Say(absl::StrFormat("load running: %d threads; warm-up %.1f s, baseline %.1f s", kLoadThreads,
                      options.warmup_s, baseline_s));
  absl::SleepFor(absl::Seconds(options.warmup_s));
  const double baseline_begin = load->Now();
  absl::SleepFor(absl::Seconds(baseline_s));
  const double baseline_end = load->Now();
  Say(absl::StrFormat("baseline done: %d steps so far", load->steps_done()));

  // The migration, under load.
  v1::PlanRebalanceRequest plan_request;
  plan_request.set_by(v1::PlanRebalanceRequest::SLOTS);
  v1::PlanRebalanceResponse plan;
  EMBER_RETURN_IF_ERROR(
      Call(*cluster.admin, &v1::AdminService::Stub::PlanRebalance, plan_request, &plan, true));
  if (plan.spec().moves_size() == 0) return absl::InternalError("PlanRebalance planned no move");
  v1::MigrationSpec spec = plan.spec();
  spec.set_bytes_per_sec(0);
  spec.set_reason("ember-bench rebalance");
  double migration_begin = 0;
  double migration_end = 0;
  EMBER_ASSIGN_OR_RETURN(const v1::Migration op,
                         MigrateUnderLoad(cluster, *load, spec, &migration_begin, &migration_end));
  // The same load on the new topology, with nothing moving: how much of the drop
  // during the move is the copy, and how much is a third shard on the same cores.
  const double after_begin = load->Now();
  absl::SleepFor(absl::Seconds(baseline_s));
  const double after_end = load->Now();

  // The same rows back (drain shard 2), throttled: what a throttle buys the trainers.
  v1::PlanRebalanceRequest drain_request;
  drain_request.set_by(v1::PlanRebalanceRequest::SLOTS);
  drain_request.add_drain(2);
  v1::PlanRebalanceResponse drain_plan;
  EMBER_RETURN_IF_ERROR(Call(*cluster.admin, &v1::AdminService::Stub::PlanRebalance, drain_request,
                             &drain_plan, true));
  v1::MigrationSpec drain = drain_plan.spec();
  drain.set_bytes_per_sec(kThrottleBytesPerSec);
  drain.set_reason("ember-bench rebalance: drain shard 2, throttled");
  double throttled_begin = 0;
  double throttled_end = 0;
  EMBER_ASSIGN_OR_RETURN(const v1::Migration throttled,
                         MigrateUnderLoad(cluster, *load, drain, &throttled_begin, &throttled_end));
  load->Stop();

  // Figures of the move and the load.
  const std::vector<CallRecord> calls = load->Calls();
  const std::vector<double> step_ends = load->StepEnds();
  const Window before = Summarize(calls, step_ends, baseline_begin, baseline_end);
  const Window during = Summarize(calls, step_ends, migration_begin, migration_end);
  int64_t failed = 0;
  for (const CallRecord& c : calls) failed += c.ok ? 0 : 1;
  if (failed > 0)
    Say(absl::StrCat(failed, " calls failed; first: ", load->FirstError().ToString()));
  uint64_t slots_moved = 0;
  for (const v1::SlotMove& move : op.spec().moves()) {
    for (const v1::SlotRange& r : move.ranges()) slots_moved += r.last() - r.first() + 1;
  }
  const double eps_before = kExamplesPerStep * before.steps / before.seconds;
  const double eps_during = kExamplesPerStep * during.steps / during.seconds;
  const Window after = Summarize(calls, step_ends, after_begin, after_end);
  const double eps_after = kExamplesPerStep * after.steps / after.seconds;
  figures.AddInt("migration_moves", op.spec().moves_size());
  figures.AddInt("slots_moved", static_cast<int64_t>(slots_moved));
  figures.AddInt("migration_rows", static_cast<int64_t>(op.rows_copied()));
  figures.AddInt("migration_bytes", static_cast<int64_t>(op.bytes_copied()));
  figures.AddNumber("migration_seconds", op.seconds());
  figures.AddNumber("migration_wall_seconds", migration_end - migration_begin);
  figures.AddNumber("migration_rows_per_sec", op.rows_copied() / op.seconds());
  figures.AddNumber("migration_mb_per_sec", op.bytes_copied() / 1e6 / op.seconds());
  figures.AddInt("migration_restarts", op.restarts());
  figures.AddNumber("max_fence_ms", op.max_fence_ms());
  figures.AddNumber("max_pause_ms", during.max_call_ms);
  figures.AddNumber("baseline_max_call_ms", before.max_call_ms);
  figures.AddNumber("pause_vs_baseline_max_call", during.max_call_ms / before.max_call_ms);
  figures.AddNumber("baseline_p99_call_ms", before.p99_call_ms);
  figures.AddNumber("during_p99_call_ms", during.p99_call_ms);
  figures.AddNumber("examples_per_sec_before", eps_before);
  figures.AddNumber("examples_per_sec_during", eps_during);
  figures.AddNumber("examples_per_sec_during_vs_before", eps_during / eps_before);
  figures.AddNumber("examples_per_sec_during_vs_before_target", kDuringVsBeforeTarget);
  figures.AddBool("examples_per_sec_during_vs_before_met",
                  eps_during / eps_before >= kDuringVsBeforeTarget);  // false for NaN
  figures.AddNumber("examples_per_sec_after", eps_after);
  figures.AddNumber("examples_per_sec_after_vs_before", eps_after / eps_before);
  figures.AddNumber("examples_per_sec_during_vs_after", eps_during / eps_after);
  const Window slowed = Summarize(calls, step_ends, throttled_begin, throttled_end);
  figures.AddInt("throttled_bytes_per_sec", static_cast<int64_t>(kThrottleBytesPerSec));
  figures.AddInt("throttled_rows", static_cast<int64_t>(throttled.rows_copied()));
  figures.AddNumber("throttled_seconds", throttled.seconds());
  figures.AddNumber("throttled_mb_per_sec", throttled.bytes_copied() / 1e6 / throttled.seconds());
  figures.AddNumber("throttled_max_fence_ms", throttled.max_fence_ms());
  figures.AddNumber("throttled_max_pause_ms", slowed.max_call_ms);
  figures.AddNumber("throttled_examples_per_sec_during_vs_before",
                    kExamplesPerStep * slowed.steps / slowed.seconds / eps_before);
  figures.AddInt("failed_calls", failed);

  // Checks, with the load stopped.
  EMBER_ASSIGN_OR_RETURN(const ClusterMap map, cluster.Map());
  std::vector<int64_t> owned(3, 0);
  for (uint32_t slot = 0; slot < kNumSlots; ++slot) {
    const uint32_t owner = map.slot_map.OwnerOf(slot);
    if (owner >= owned.size()) {
      return absl::InternalError(
          absl::StrCat("after the move slot ", slot, " is owned by ", owner, ", not shard 0-2"));
    }
    ++owned[owner];
  }
  for (const v1::SlotMove& move : throttled.spec().moves()) {
    for (const v1::SlotRange& r : move.ranges()) {
      for (uint32_t slot = r.first(); slot <= r.last(); ++slot) {
        if (map.slot_map.OwnerOf(slot) != move.target()) {
          return absl::InternalError(absl::StrCat("slot ", slot, " should have moved to shard ",
                                                  move.target(), " but is owned by ",
                                                  map.slot_map.OwnerOf(slot)));
        }
      }
    }
  }
  EMBER_ASSIGN_OR_RETURN(const std::vector<PsClient::TableDigest> audit_after_shards,
                         cluster.Checksums(kAudit));
  EMBER_ASSIGN_OR_RETURN(const std::vector<PsClient::TableDigest> train_after,
                         cluster.Checksums(kTrain));
  const PsClient::TableDigest audit_after = Sum(audit_after_shards);
  if (audit_after.rows != audit_before.rows || audit_after.digest != audit_before.digest) {
    return absl::DataLossError(absl::StrFormat(
        "table %s changed across the move: %d rows, digest %016x before; %d rows, digest %016x "
        "after",
        kAudit, audit_before.rows, audit_before.digest, audit_after.rows, audit_after.digest));
  }
  if (Sum(train_after).rows != static_cast<uint64_t>(rows)) {
    return absl::DataLossError(absl::StrCat("table ", kTrain, " holds ", Sum(train_after).rows,
                                            " rows after the move; expected ", rows));
  }
  std::vector<uint64_t> per_shard;
  for (const auto& d : train_after) per_shard.push_back(d.rows);
  if (per_shard.size() > 2 && per_shard[2] != 0) {
    return absl::DataLossError(
        absl::StrCat("drained shard 2 still holds ", per_shard[2], " rows of ", kTrain));
  }
  // Over the shards that own slots (the drained one holds nothing).
  const size_t holders = static_cast<size_t>(
      std::count_if(owned.begin(), owned.end(), [](int64_t n) { return n > 0; }));
  const double mean = static_cast<double>(rows) / std::max<size_t>(holders, 1);
  figures.AddString("rows_per_shard_after", absl::StrJoin(per_shard, ","));
  figures.AddString("slots_per_shard_after", absl::StrJoin(owned, ","));
  figures.AddNumber("rows_max_over_mean_after",
                    *std::max_element(per_shard.begin(), per_shard.end()) / mean);
  figures.AddBool("checks_passed", true);
  Say(absl::StrFormat(
      "checks passed: every slot owned by shard 0-2 (%s), %s digest unchanged, "
      "%d %s rows (%s)",
      absl::StrJoin(owned, "/"), kAudit, rows, kTrain, absl::StrJoin(per_shard, "/")));
  return figures;
}

}  // namespace

EMBER_BENCH_SUITE(rebalance,
                  "online slot migration onto a new shard under a training load (starts a "
                  "coordinator and 3 shards)",
                  RunRebalanceSuite);

}  // namespace ember::bench
