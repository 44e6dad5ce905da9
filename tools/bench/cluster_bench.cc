// Copyright 2026 The Ember Authors.
//
// `ember-bench cluster`: Ember over gRPC against Redis and against a no-op gRPC
// server, side by side in one run on one machine.
//
// The suite starts three local processes and stops them (RAII) however it ends:
//  * ember-ps (found next to ember-bench): one shard, a scratch --data_dir, --wal=false,
//    a memory budget of 1 KiB per row (every row stays resident). The bench creates
//    table "bench" (dim 64, SGD, lr 0.01) over gRPC and populates rows_small rows by
//    pushing every id 0..rows-1 once, 1000 ids per push.
//  * redis-server (Debian's, /usr/bin/redis-server) on a free port, no persistence. It
//    is loaded with the same rows: the values pulled from ember-ps, 256 bytes each,
//    under Ember's 10-byte row key (cluster_fixtures.h, RedisRowKey), 1000 per MSET,
//    through hiredis (redis_client.h).
//  * ember-noop-ps (noop_server.h): PsService answering every Pull with 1000 x 64 zero
//    floats from one pre-serialized buffer; the transport ceiling.
// Then, all in one Google Benchmark group (repetitions interleaved at random, so a
// slow spell hits every case), each case on this one thread over uniform random ids:
//  * ember_pull, ember_pull4, ember_pull8: PsClient::PullAsync of 1000 ids, 1, 4 and
//    8 in flight (N handles on one PsClient, i.e. one gRPC channel); ember_pull4 has
//    Redis's pipeline depth, for the comparison at equal concurrency.
//  * ember_push_sgd, ember_push8_sgd: PsClient::PushAsync of 1000 SGD gradients.
//  * redis_mget, redis_mget4: hiredis MGET of 1000 keys, 1 and 4 pipelined on one
//    connection (redisAppendCommandArgv + redisGetReply), values copied out.
//  * noop_grpc_pull(8), noop_grpc_push(8): the same PsClient calls against the no-op.
// Ember and the no-op are measured through the same client code, so their ratio is
// the cost of the server's work. Ratios and targets: cluster_targets.h; figure names:
// docs/PERFORMANCE.md.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/ps_client.h"
#include "common/slot_map.h"
#include "common/status_macros.h"
#include "ember/v1/table.pb.h"
#include "tools/bench/bench_runner.h"
#include "tools/bench/cluster_fixtures.h"
#include "tools/bench/cluster_targets.h"
#include "tools/bench/figures.h"
#include "tools/bench/redis_client.h"
#include "tools/bench/storage_fixtures.h"
#include "tools/bench/suite.h"
#include "tools/harness/process.h"

namespace ember::bench::cluster {
namespace {

constexpr size_t kDim = 64;
constexpr size_t kBatch = 1000;
constexpr size_t kValueBytes = kDim * sizeof(float);  // one row in Redis: 256 bytes
constexpr size_t kInFlight = 8;                       // PsClient calls outstanding
constexpr size_t kRedisPipeline = 4;                  // MGETs outstanding
constexpr size_t kPoolKeys = size_t{1} << 22;         // keys per measured stream
constexpr char kTable[] = "bench";
constexpr uint64_t kTableSeed = 0xe3be7;
constexpr char kRedisBinary[] = "/usr/bin/redis-server";
constexpr absl::Duration kStartTimeout = absl::Seconds(30);

void Say(std::string_view message) { Log("cluster", message); }

v1::TableConfig BenchTable() {
  v1::TableConfig config;
  config.set_name(kTable);
  config.set_dim(kDim);
  config.set_seed(kTableSeed);
  config.mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
  config.mutable_optimizer()->set_learning_rate(0.01f);
  return config;
}

// Memory budget of ember-ps: 1 KiB per row, several times an SGD row's footprint.
int64_t BudgetMb(int64_t rows) { return std::max<int64_t>(256, (rows * 1024 >> 20) + 1); }

// Pushes every id 0..rows-1 once (1000 per push), so each has a stored row.
absl::Status PopulateEmber(PsClient& client, int64_t rows, absl::Span<const float> grads) {
  const absl::Time start = absl::Now();
  EMBER_RETURN_IF_ERROR(PopulateRows(client, kTable, rows, kBatch, grads));
  Say(absl::StrFormat("ember-ps: populated %d rows in %.1f s", rows,
                      absl::ToDoubleSeconds(absl::Now() - start)));
  return absl::OkStatus();
}

// Copies rows 0..rows-1 from ember-ps into Redis (MSET of 1000 per call).
absl::Status LoadRedis(PsClient& client, RedisConnection& redis, int64_t rows) {
  std::vector<uint64_t> ids;
  std::vector<float> values(kBatch * kDim);
  std::vector<std::string> keys;
  const absl::Time start = absl::Now();
  for (int64_t first = 0; first < rows; first += kBatch) {
    const int64_t n = std::min<int64_t>(kBatch, rows - first);
    ids.resize(n);
    keys.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      ids[i] = first + i;
      keys[i] = RedisRowKey(kTableSeed, ids[i]);
    }
    EMBER_RETURN_IF_ERROR(client.Pull(kTable, ids, absl::MakeSpan(values.data(), n * kDim)));
    EMBER_RETURN_IF_ERROR(redis.Mset(
        keys, std::string_view(reinterpret_cast<const char*>(values.data()), n * kValueBytes),
        kValueBytes));
  }
  Say(absl::StrFormat("redis: loaded %d rows in %.1f s", rows,
                      absl::ToDoubleSeconds(absl::Now() - start)));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Process>> StartServer(const std::string& binary,
                                                     const std::vector<std::string>& args) {
  std::error_code ec;
  if (!std::filesystem::exists(binary, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat(binary, " not found (build it: ninja -C build ember-ps ember-noop-ps)"));
  }
  return Process::Start(binary, args, "listening on ", kStartTimeout);
}

absl::StatusOr<Figures> RunClusterSuite(const BenchOptions& options) {
  const int64_t rows = options.rows_small;
  Figures figures;
  figures.AddString("suite", "cluster");
  figures.AddInt("rows", rows);
  figures.AddInt("dim", kDim);
  figures.AddInt("batch_keys", kBatch);
  figures.AddString("optimizer", "sgd");
  figures.AddInt("in_flight", kInFlight);
  figures.AddInt("redis_pipeline", kRedisPipeline);
  figures.AddInt("redis_value_bytes", kValueBytes);
  figures.AddString("redis_client", absl::StrCat("hiredis ", HiredisVersion()));
  figures.AddInt("memory_budget_mb", BudgetMb(rows));
  figures.AddString("client", "PsClient, one channel, one thread");
  figures.AddString("noop_server", "separate process");
  figures.AddNumber("min_time_s", options.min_time_s);
  figures.AddNumber("warmup_s", options.warmup_s);
  figures.AddInt("repetitions", options.repetitions);
  figures.AddInt("hardware_threads", std::thread::hardware_concurrency());

  const std::string bin_dir = ExecutableDir();
  if (bin_dir.empty()) return absl::InternalError("cannot read /proc/self/exe");

  // Declaration order is teardown order reversed: rings and clients go before the
  // servers they talk to, the servers before their scratch directory.
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<BenchDir> dir, BenchDir::Open(""));
  Say(absl::StrCat("starting ember-ps, ember-noop-ps and redis-server under ", dir->path()));
  EMBER_ASSIGN_OR_RETURN(
      std::unique_ptr<Process> ps,
      StartServer(bin_dir + "/ember-ps",
                  {absl::StrCat("--data_dir=", dir->path(), "/ps"), "--port=0", "--wal=false",
                   absl::StrCat("--memory_budget_mb=", BudgetMb(rows))}));
  EMBER_ASSIGN_OR_RETURN(
      std::unique_ptr<Process> noop,
      StartServer(bin_dir + "/ember-noop-ps",
                  {"--port=0", absl::StrCat("--pull_values_bytes=", kBatch * kValueBytes)}));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<RedisServer> redis,
                         RedisServer::Start(kRedisBinary, dir->path() + "/redis", kStartTimeout));
  Say(absl::StrFormat("ember-ps pid %d at %s, ember-noop-ps pid %d at %s, redis pid %d port %d",
                      ps->pid(), ps->ready_text(), noop->pid(), noop->ready_text(), redis->pid(),
                      redis->port()));

  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> ember, SingleShardClient(ps->ready_text()));
  EMBER_RETURN_IF_ERROR(ember->CreateTableEverywhere(BenchTable()));
  EMBER_ASSIGN_OR_RETURN(const v1::TableConfig table, ember->GetTable(kTable));
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> noop_client,
                         SingleShardClient(noop->ready_text()));
  EMBER_RETURN_IF_ERROR(noop_client->AddTable(table));  // the no-op has no tables
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<RedisConnection> redis_conn,
                         RedisConnection::Connect(redis->port()));

  const std::vector<float> grads = RandomGradients(kBatch * kDim, options.seed + 2);
  EMBER_RETURN_IF_ERROR(PopulateEmber(*ember, rows, grads));
  EMBER_RETURN_IF_ERROR(LoadRedis(*ember, *redis_conn, rows));

  // Every case draws from the same pool of uniform ids (ids are rows here).
  const std::vector<uint64_t> pool = UniformRows(rows, kPoolKeys, options.seed);
  PsPullPipeline ember_pull(ember.get(), kTable, kDim, &pool, kBatch, kInFlight);
  PsPushPipeline ember_push(ember.get(), kTable, &pool, kBatch, grads, kInFlight);
  PsPullPipeline noop_pull(noop_client.get(), kTable, kDim, &pool, kBatch, kInFlight);
  PsPushPipeline noop_push(noop_client.get(), kTable, &pool, kBatch, grads, kInFlight);
  RedisMgetPipeline redis_mget(redis_conn.get(), kTableSeed, &pool, kBatch, kValueBytes,
                               kRedisPipeline);
  // One pipeline may feed two rings only if one ring is drained before the other
  // starts; with interleaved repetitions they are not, so each ring has its own.
  PsPullPipeline ember_pull_1(ember.get(), kTable, kDim, &pool, kBatch, 1);
  PsPullPipeline ember_pull_p(ember.get(), kTable, kDim, &pool, kBatch, kRedisPipeline);
  PsPushPipeline ember_push_1(ember.get(), kTable, &pool, kBatch, grads, 1);
  PsPullPipeline noop_pull_1(noop_client.get(), kTable, kDim, &pool, kBatch, 1);
  PsPushPipeline noop_push_1(noop_client.get(), kTable, &pool, kBatch, grads, 1);
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<RedisConnection> redis_conn_1,
                         RedisConnection::Connect(redis->port()));
  RedisMgetPipeline redis_mget_1(redis_conn_1.get(), kTableSeed, &pool, kBatch, kValueBytes, 1);

  struct Ring {
    std::string figure;
    InFlightRing ring;
  };
  std::vector<std::unique_ptr<Ring>> rings;
  auto add = [&rings](std::string figure, Pipeline* p, size_t depth) {
    rings.push_back(std::make_unique<Ring>(Ring{std::move(figure), InFlightRing(p, depth)}));
  };
  add("ember_pull", &ember_pull_1, 1);
  add(absl::StrCat("ember_pull", kRedisPipeline), &ember_pull_p, kRedisPipeline);
  add(absl::StrCat("ember_pull", kInFlight), &ember_pull, kInFlight);
  add("ember_push_sgd", &ember_push_1, 1);
  add(absl::StrCat("ember_push", kInFlight, "_sgd"), &ember_push, kInFlight);
  add("redis_mget", &redis_mget_1, 1);
  add(absl::StrCat("redis_mget", kRedisPipeline), &redis_mget, kRedisPipeline);
  add("noop_grpc_pull", &noop_pull_1, 1);
  add(absl::StrCat("noop_grpc_pull", kInFlight), &noop_pull, kInFlight);
  add("noop_grpc_push", &noop_push_1, 1);
  add(absl::StrCat("noop_grpc_push", kInFlight), &noop_push, kInFlight);

  // Each case's server: its CPU per call is the server's own cost (robust to load).
  auto server_pid = [&](const std::string& figure) {
    if (absl::StartsWith(figure, "ember_")) return ps->pid();
    if (absl::StartsWith(figure, "redis_")) return redis->pid();
    return noop->pid();
  };
  std::vector<BenchCase> cases;
  for (const auto& r : rings) {
    InFlightRing* ring = &r->ring;
    const int pid = server_pid(r->figure);
    cases.push_back({r->figure, kBatch, [ring] { return ring->Step(); },
                     [pid] { return ProcessCpuSeconds(pid); }});
  }
  Say(absl::StrFormat("measuring %d cases x %d repetitions", cases.size(), options.repetitions));
  absl::StatusOr<absl::flat_hash_map<std::string, Measurement>> results =
      RunCases(cases, RunConfig{options.min_time_s, options.warmup_s, options.repetitions});
  absl::Status drained;
  for (const auto& r : rings) drained.Update(r->ring.Drain());
  if (!results.ok()) return results.status();
  EMBER_RETURN_IF_ERROR(drained);
  for (const auto& r : rings) {
    figures.AddNumber(r->figure + "_keys_per_sec", (*results)[r->figure].keys_per_sec);
  }
  for (const auto& r : rings) {
    figures.AddNumber(r->figure + "_server_cpu_us_per_call",
                      (*results)[r->figure].server_cpu_us_per_batch);
    figures.AddNumber(r->figure + "_client_cpu_us_per_call",
                      (*results)[r->figure].client_cpu_us_per_batch);
  }

  AddClusterRatios(figures, kInFlight, kRedisPipeline);

  // ember-ps is killed: its data dir is scratch, and flushing every dirty row at
  // shutdown is not part of the benchmark. The others stop on SIGTERM.
  rings.clear();
  EMBER_RETURN_IF_ERROR(ps->Kill().status());
  EMBER_RETURN_IF_ERROR(noop->Stop(absl::Seconds(5)).status());
  EMBER_RETURN_IF_ERROR(redis->Stop(absl::Seconds(5)).status());
  Say("stopped ember-ps, ember-noop-ps and redis-server");
  return figures;
}

}  // namespace

EMBER_BENCH_SUITE(cluster,
                  "ember-ps pull/push over gRPC vs Redis MGET vs a no-op gRPC server (starts "
                  "all three)",
                  RunClusterSuite);

}  // namespace ember::bench::cluster
