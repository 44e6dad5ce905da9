// Copyright 2026 The Ember Authors.
//
// ember-ps: one PS shard serving PsService over gRPC.
//
//   ember-ps --data_dir=/data/ember/shard-0 --port=7000 --shard_id=0 --num_shards=2
//
// With --port=0 the kernel picks a free port. Once serving, the process prints exactly
// one line "listening on HOST:PORT" to stdout (tests and scripts wait for it); logs go
// to stderr. With --metrics_port=N (0 picks a free port) it also serves Prometheus
// metrics (server/ps/ps_metrics.h) at http://METRICS_HOST:PORT/metrics and prints one
// line "metrics on METRICS_HOST:PORT" right after the listening line.
//
// SIGTERM or SIGINT shuts down gracefully: stop accepting calls, let calls in flight
// finish (bounded by --shutdown_grace_ms; idle client connections are closed without
// waiting, see server/shared/graceful_shutdown.h), flush dirty rows (store Close) and
// exit 0 (server/shared/serve.h); exit 1 if the flush failed. Bad flags exit 2 with a
// message (common/flags.h).
//
// Bounds against one client (server/ps/shard_bounds.h): Pulls in flight, update
// streams, idle connections; a listener that stopped accepting makes the shard stop as
// above and exit 75 (server/shared/listener_check.h: restart me).
//
// One memory cap (server/ps/memory_limit.h): --memory_limit_mb divides one cap into
// shares for the memory tier, RocksDB (block cache with memtables charged to it), the
// change log, replicas and Pull answers in flight; a part's own flag replaces its share.
//
// Until a coordinator exists, the shard's slot map is SlotMap::Even over shard ids
// 0..num_shards-1 at epoch 1.
//
// Hot keys (proto/ember/v1/hotkeys.proto): the shard counts the keys it serves in
// per-table heavy hitters (--heavy_hitters_*); with --coordinator every heartbeat
// reports them and brings the published hot set back, which the shard applies
// (replica reads, PutReplicas, copies of its own hot rows to their holders).

#include <malloc.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/admin_auth.h"
#include "common/cluster_token.h"
#include "common/flags.h"
#include "common/job_name.h"
#include "common/log.h"
#include "common/malloc_tuning.h"
#include "common/metrics.h"
#include "common/slot_map.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "prometheus/registry.h"
#include "rocksdb/cache.h"
#include "rocksdb/env.h"
#include "rocksdb/write_buffer_manager.h"
#include "server/ps/heavy_hitters.h"
#include "server/ps/memory_limit.h"
#include "server/ps/ps_metrics.h"
#include "server/ps/ps_service.h"
#include "server/ps/shard_agent.h"
#include "server/ps/shard_bounds.h"
#include "server/ps/shard_drain.h"
#include "server/shared/background_lane.h"
#include "server/shared/graceful_shutdown.h"
#include "server/shared/listener_check.h"
#include "server/shared/serve.h"
#include "server/shared/shard_storage.h"
#include "server/store/embedding_store.h"
#include "server/store/fault_injection_fs.h"
#include "server/store/rocksdb_backend.h"

namespace ember {
namespace {

constexpr int64_t kDefaultMemoryBudgetMb = 1024;
constexpr int64_t kDefaultBlockCacheMb = 256;
constexpr int64_t kDefaultWriteBufferMb = 64;
constexpr int kCappedMallocArenas = 2;  // glibc arenas under --memory_limit_mb

struct PsMainOptions {
  std::string data_dir;
  ServerFlags server;
  uint32_t shard_id = 0;
  uint32_t num_shards = 1;
  std::string coordinator;
  std::string advertise_address;
  int64_t heartbeat_ms = 500;
  int64_t memory_limit_mb = 0;  // 0: no cap (memory_limit.h)
  // The parts' own flags: unset unless given, so that the cap knows what was asked.
  MemoryParts parts;
  bool wal = true;
  bool frequency_admission = StoreOptions().frequency_admission;
  int64_t max_message_mb = 256;
  uint32_t max_batch_keys = StoreOptions().max_batch_keys;
  MemoryShares shares;  // from memory_limit_mb and parts, when capped
  int crash_after_checkpoints = 0;
  ServerSecurityFlags security;
  AdminPolicy admin;  // from security
  ClusterTokenFlags cluster_token_flags;
  std::string cluster_token;  // from cluster_token_flags
  std::string crash_on_migration_method;
  int crash_on_migration_count = 0;
  HotKeyOptions hot_keys;
  ShardBoundsFlags bounds;           // issue 28 items 1.1, 1.3, 1.5 (shard_bounds.h)
  size_t heavy_hitters_report = 32;  // ember-ps reports more than HotKeyOptions' 16
  double disk_fault_rate = 0;
  int64_t disk_faults_after_ms = 0;
  int64_t disk_faults_for_ms = 0;
  int64_t disk_faults_until_unix_ms = 0;
  DrainFlags drain;
  BackgroundPriority migration_copy_priority = BackgroundPriority::kLow;
  BackgroundPriority compaction_priority = BackgroundPriority::kNormal;
};

// --test_crash_on_migration=METHOD:N.
absl::Status ParseCrashOnMigration(const Flag& flag, PsMainOptions* o) {
  const size_t colon = flag.value.rfind(':');
  Flag count{flag.name, colon == absl::string_view::npos ? "" : flag.value.substr(colon + 1), true};
  if (colon == absl::string_view::npos || colon == 0 ||
      !ParseNumber(count, &o->crash_on_migration_count).ok() || o->crash_on_migration_count < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--test_crash_on_migration: expected METHOD:N with N >= 1, got '", flag.value, "'"));
  }
  o->crash_on_migration_method = std::string(flag.value.substr(0, colon));
  return absl::OkStatus();
}

void DeclareFlags(FlagSet& flags, PsMainOptions& o) {
  flags.Synopsis("--data_dir=DIR [--flag=value ...]");
  flags.Description("One PS shard serving PsService over gRPC.");
  flags.String("data_dir", &o.data_dir, "DIR", "RocksDB directory of this shard").Required();
  DeclareListenFlags(flags, &o.server);
  flags.Number("shard_id", &o.shard_id, "N",
               "this shard's id; below --num_shards without a "
               "coordinator");
  flags
      .Number("num_shards", &o.num_shards, "N",
              "shards in the (even) slot map, epoch 1, when there is no coordinator")
      .Min(1);
  flags.String("coordinator", &o.coordinator, "HOST:PORT",
               "register with this coordinator and take the slot map and tables from it (then "
               "--num_shards is ignored)");
  flags
      .String("advertise_address", &o.advertise_address, "A",
              "host:port clients reach this shard at")
      .DefaultText("HOST:bound port");
  flags.Number("heartbeat_ms", &o.heartbeat_ms, "N", "coordinator heartbeat interval").Above(0);
  flags
      .Number("memory_limit_mb", &o.memory_limit_mb, "N",
              "cap on the shard's memory as a whole, in MiB, divided into shares: memory "
              "tier, RocksDB block cache with the memtables charged to it, change log, "
              "replicas, Pull answers in flight and a 72 MiB process baseline "
              "(docs/OPERATIONS.md); a part's own flag given beside it replaces its share. "
              "0 = no cap: each part has only its own flag")
      .Range(0, int64_t{1} << 30);
  flags
      .Number("memory_budget_mb", &o.parts.memory_budget_mb, "N",
              "memory tier budget in MiB; 0 = unlimited")
      .Range(0, int64_t{1} << 40)
      .DefaultText(absl::StrCat(kDefaultMemoryBudgetMb, "; with --memory_limit_mb its share"));
  flags.Bool("wal", &o.wal, "RocksDB write-ahead log");
  flags.Choice("compaction_priority", &o.compaction_priority, BackgroundPriorityWords(),
               "CPU priority of RocksDB's compaction threads: normal, low (nice 19) or idle "
               "(SCHED_IDLE: only CPU nothing else wants). Memtable flushes keep the normal "
               "priority. idle keeps training fastest during slot migrations, but where other "
               "processes saturate the machine starved compaction stalls flushes, writes and "
               "migrations: only for dedicated shard machines (docs/OPERATIONS.md)");
  flags.Choice("migration_copy_priority", &o.migration_copy_priority, BackgroundPriorityWords(),
               "CPU priority of the thread that serves a slot migration's snapshot pages "
               "(ExportRows, bulk ImportRows): low (nice 19), idle (SCHED_IDLE) or normal (on "
               "gRPC's threads)");
  flags.Bool("frequency_admission", &o.frequency_admission,
             "while the memory budget is full, a row a pull reads from RocksDB enters the "
             "memory tier only if its ID was seen more often than the row it would push out "
             "(TinyLFU-style); false: every row read enters (plain CLOCK)");
  flags
      .Number("block_cache_mb", &o.parts.block_cache_mb, "N",
              "RocksDB block cache in MiB, outside the memory budget")
      .Range(1, int64_t{1} << 20)
      .DefaultText(absl::StrCat(kDefaultBlockCacheMb, "; with --memory_limit_mb its share"));
  flags
      .Number("write_buffer_mb", &o.parts.write_buffer_mb, "N",
              "RocksDB memtable size in MiB, up to 3 per table, outside the memory budget")
      .Range(1, 4096)
      .DefaultText(absl::StrCat(kDefaultWriteBufferMb, "; with --memory_limit_mb its share"));
  flags
      .Number("max_message_mb", &o.max_message_mb, "N",
              "largest request/response in MiB; a larger request fails with RESOURCE_EXHAUSTED")
      .Range(1, 2047);
  flags
      .Number("max_batch_keys", &o.max_batch_keys, "N",
              "most ids per Pull or Push; more fail with INVALID_ARGUMENT")
      .Min(1);
  flags
      .Number("change_log_entries", &o.parts.change_log_entries, "N",
              "change-log entries kept in memory (32 bytes each): how far back WatchUpdates, "
              "ExportChanges and delta checkpoints reach")
      .Range(1, uint64_t{1} << 30)
      .DefaultText(
          absl::StrCat(StoreOptions().change_log_capacity, "; with --memory_limit_mb its share"));
  DeclareMetricsAndShutdownFlags(flags, &o.server);
  DeclareDrainFlags(flags, &o.drain);
  DeclareShardBoundsFlags(flags, &o.bounds);

  flags.Section("Hot keys (proto/ember/v1/hotkeys.proto):");
  HeavyHittersOptions& hh = o.hot_keys.heavy_hitters;
  flags
      .Number("heavy_hitters_capacity", &hh.capacity, "N",
              "keys tracked per table for the hot-key reports (a Space-Saving summary, "
              "server/ps/heavy_hitters.h)")
      .Range(0, size_t{1} << 20);
  flags
      .Seconds("heavy_hitters_half_life_s", &hh.half_life,
               "half-life of the decayed key rates, in seconds")
      .RangeAbove(0, 86400);
  flags
      .Number("heavy_hitters_sample", &hh.sample_every, "N",
              "record each pulled key with probability 1/N (weight N, unbiased); 1 records "
              "every key")
      .Min(1);
  flags
      .Number("heavy_hitters_report", &o.heavy_hitters_report, "N",
              "keys per table in each heartbeat's report and in GetShardInfo")
      .Range(0, 4096);

  flags.Section("Admin credential:");
  DeclareServerSecurityFlags(
      flags,
      {.token = "require an admin credential on the calls only the coordinator and other "
                "shards make (slot migration, CheckpointShard, RestoreShard, PutReplicas): this "
                "token (metadata ember-admin-token; give the coordinator the same one) or an "
                "--admin_identities certificate. Not required without TLS",
       .identities = "client-certificate common names with the admin role (e.g. "
                     "ember-admin,ember-server). With TLS, a token or identities are "
                     "required: a worker's certificate must not move slots"},
      &o.security);
  DeclareClusterTokenFlags(
      flags,
      "plaintext clusters: CreateTable must carry this token (metadata ember-cluster-token) "
      "or the admin token, and the shard sends it to the coordinator (give every process "
      "the coordinator's)",
      &o.cluster_token_flags);

  flags.Section("Fault tests only:");
  flags.Number("test_crash_after_checkpoints", &o.crash_after_checkpoints, "N",
               "SIGKILL this process right after it writes its Nth checkpoint snapshot; 0 "
               "never");
  flags.Custom("test_crash_on_migration", "METHOD:N",
               "SIGKILL this process when its Nth call of the slot-migration RPC METHOD "
               "(ExportRows, ExportChanges, ImportRows, FenceSlots, DropSlots, InstallSlotMap) "
               "arrives",
               [&o](const Flag& flag) { return ParseCrashOnMigration(flag, &o); });
  flags
      .Number("test_disk_fault_rate", &o.disk_fault_rate, "P",
              "fail this share of RocksDB's file reads and writes with an IO error "
              "(server/store/fault_injection_fs.h), from --test_disk_faults_after_ms after "
              "the shard serves, for --test_disk_faults_for_ms (0: until shutdown; the flush "
              "at shutdown runs without faults)")
      .Range(0, 1);
  flags
      .Number("test_disk_faults_after_ms", &o.disk_faults_after_ms, "N",
              "the start of the --test_disk_fault_rate window")
      .Min(0);
  flags
      .Number("test_disk_faults_for_ms", &o.disk_faults_for_ms, "N",
              "the length of the --test_disk_fault_rate window")
      .Min(0);
  flags
      .Number("test_disk_faults_until_unix_ms", &o.disk_faults_until_unix_ms, "T",
              "and no faults after this wall-clock time (ms since 1970), also in a restarted "
              "process; 0 none")
      .Min(0);
}

// The checks of flags together, after parsing.
absl::Status FinishFlags(PsMainOptions& o) {
  if (o.coordinator.empty() && o.shard_id >= o.num_shards) {
    return absl::InvalidArgumentError("--shard_id must be < --num_shards");
  }
  FinishServerFlags(&o.server);
  o.hot_keys.shard_info_top_n = o.heavy_hitters_report;
  o.hot_keys.owner.sender.max_message_bytes = static_cast<int>(o.max_message_mb << 20);
  EMBER_ASSIGN_OR_RETURN(
      o.admin,
      CheckServerSecurityFlags(
          o.security, "any certificate of the CA (a worker's) could move this shard's slots"));
  EMBER_ASSIGN_OR_RETURN(o.cluster_token,
                         LoadClusterToken(o.cluster_token_flags, o.security.tls.enabled()));
  if (o.memory_limit_mb > 0) {
    o.parts.max_inflight_mb = o.bounds.max_inflight_mb;
    EMBER_ASSIGN_OR_RETURN(o.shares, DivideMemoryLimit(o.memory_limit_mb, o.parts,
                                                       StoreOptions().memory_hard_limit_factor));
  }
  return absl::OkStatus();
}

// The store and RocksDB sizes: the cap's shares, or each part's flag (or its default).
void SizeStorage(const PsMainOptions& o, ShardStorageOptions* storage) {
  RocksDbOptions& rocks = storage->rocksdb;
  StoreOptions& store = storage->store;
  if (o.memory_limit_mb > 0) {
    const MemoryShares& s = o.shares;
    rocks.block_cache_bytes = s.block_cache_bytes;
    rocks.write_buffer_bytes = s.write_buffer_bytes;
    rocks.write_buffer_manager_bytes = s.write_buffer_manager_bytes;
    rocks.cache_index_and_filter_blocks = true;
    store.memory_budget_bytes = s.memory_budget_bytes;
    store.change_log_capacity = s.change_log_entries;
    return;
  }
  const MemoryParts& p = o.parts;
  rocks.block_cache_bytes = p.block_cache_mb.value_or(kDefaultBlockCacheMb) << 20;
  rocks.write_buffer_bytes = p.write_buffer_mb.value_or(kDefaultWriteBufferMb) << 20;
  store.memory_budget_bytes = p.memory_budget_mb.value_or(kDefaultMemoryBudgetMb) << 20;
  store.change_log_capacity = p.change_log_entries.value_or(store.change_log_capacity);
}

// What the capped parts hold now, for MemoryLimitCollector.
MemoryUse MemoryUseOf(PsServiceImpl& service, const MemoryShares& shares) {
  MemoryUse use;
  use.inflight = 2 * service.inflight_bytes();  // held twice, as the share assumes
  use.replicas = service.replica_bytes();
  use.change_log = shares.change_log;  // a ring allocated whole at open
  // Every store: the default one and each job's. They share one memory tier budget
  // and one block cache, counted once (from the default store).
  bool first = true;
  service.WithEachStore([&](const EmbeddingStore& store, const RocksDbBackend* rocksdb) {
    const bool shared_once = first;
    first = false;
    if (shared_once) use.memory_tier = store.Stats().memory_bytes;
    if (rocksdb == nullptr || rocksdb->db() == nullptr) return;
    // The block cache (blocks and charged memtables) and what table readers hold
    // outside it, which no share bounds (it grows with the SST files).
    uint64_t value = 0;
    if (shared_once &&
        rocksdb->db()->GetIntProperty(rocksdb::DB::Properties::kBlockCacheUsage, &value)) {
      use.rocksdb += static_cast<int64_t>(value);
    }
    if (rocksdb->db()->GetAggregatedIntProperty(rocksdb::DB::Properties::kEstimateTableReadersMem,
                                                &value)) {
      use.rocksdb += static_cast<int64_t>(value);
    }
  });
  return use;
}

// The --test_disk_fault_rate window: a thread that switches the file system's fault
// rates on after `after` and off after `duration` (zero: at Stop). It logs the switches
// and, each second in between, the faults injected so far (a crash loses no count).
class DiskFaultWindow {
 public:
  DiskFaultWindow(std::shared_ptr<FaultInjectionFileSystem> fs, double rate, absl::Duration after,
                  absl::Duration duration)
      : fs_(std::move(fs)),
        thread_([this, rate, after, duration] { Run(rate, after, duration); }) {}
  DiskFaultWindow(const DiskFaultWindow&) = delete;
  DiskFaultWindow& operator=(const DiskFaultWindow&) = delete;
  // Ends the window (faults off) and joins the thread.
  ~DiskFaultWindow() {
    if (!stop_.HasBeenNotified()) stop_.Notify();
    thread_.join();
  }

 private:
  void Run(double rate, absl::Duration after, absl::Duration duration) {
    if (stop_.WaitForNotificationWithTimeout(after)) return;
    fs_->SetWriteFailureRate(rate);
    fs_->SetReadFailureRate(rate);
    EMBER_LOG(INFO) << "test disk faults on: " << rate << " of RocksDB file reads and writes fail";
    const absl::Time end =
        duration > absl::ZeroDuration() ? absl::Now() + duration : absl::InfiniteFuture();
    int64_t logged = 0;
    while (!stop_.WaitForNotificationWithTimeout(std::min(absl::Seconds(1), end - absl::Now())) &&
           absl::Now() < end) {
      const int64_t injected = fs_->injected_write_failures() + fs_->injected_read_failures();
      if (injected != logged) Log("so far");
      logged = injected;
    }
    fs_->SetWriteFailureRate(0);
    fs_->SetReadFailureRate(0);
    Log("off");
  }
  void Log(absl::string_view what) {
    EMBER_LOG(INFO) << "test disk faults " << what << ": " << fs_->injected_write_failures()
                    << " write and " << fs_->injected_read_failures() << " read faults injected";
  }

  const std::shared_ptr<FaultInjectionFileSystem> fs_;
  absl::Notification stop_;
  std::thread thread_;
};

// Opens every job store under `jobs_dir` (a directory per job holding db/).
absl::Status OpenJobStores(const std::string& jobs_dir, PsServiceImpl& service) {
  std::error_code ec;
  if (!std::filesystem::exists(jobs_dir, ec)) return absl::OkStatus();
  std::vector<std::string> jobs;
  for (const auto& entry : std::filesystem::directory_iterator(jobs_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || !ValidJobName(name)) {
      EMBER_LOG(WARNING) << "ignoring " << entry.path().string() << ": not a job's store";
      continue;
    }
    jobs.push_back(name);
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", jobs_dir, ": ", ec.message()));
  std::sort(jobs.begin(), jobs.end());
  for (const std::string& job : jobs) EMBER_RETURN_IF_ERROR(service.OpenJobStore(job));
  return absl::OkStatus();
}

absl::Status Run(const PsMainOptions& o) {
  BlockStopSignals();  // before any thread starts
  if (o.memory_limit_mb > 0 && std::getenv("MALLOC_ARENA_MAX") == nullptr) {
    // glibc keeps what a thread freed in that thread's arena (8 per core by default):
    // under a flood of new IDs that residue grew past the baseline share
    // (docs/RELIABILITY.md). Two arenas keep it in check; MALLOC_ARENA_MAX overrides.
    mallopt(M_ARENA_MAX, kCappedMallocArenas);
  }
  // RunMain set them already; this only names the outcome in the log.
  if (const std::string kept = KeepFreedBuffers(); !kept.empty()) EMBER_LOG(INFO) << kept;

  ShardStorageOptions storage_options;
  storage_options.rocksdb.path = o.data_dir;
  storage_options.rocksdb.enable_wal = o.wal;
  storage_options.store.frequency_admission = o.frequency_admission;
  SizeStorage(o, &storage_options);
  if (o.memory_limit_mb > 0) EMBER_LOG(INFO) << DescribeShares(o.shares);
  storage_options.store.max_batch_keys = o.max_batch_keys;
  storage_options.crash_after_checkpoints = o.crash_after_checkpoints;
  // One memory tier budget, block cache and write buffer manager for the default store
  // and every job's (job_store.h): the shard's memory settings bound them all together.
  storage_options.store.shared_budget = NewMemoryBudget(storage_options.store.memory_budget_bytes);
  if (storage_options.rocksdb.block_cache_bytes > 0) {
    storage_options.rocksdb.shared_block_cache =
        rocksdb::NewLRUCache(static_cast<size_t>(storage_options.rocksdb.block_cache_bytes));
    if (storage_options.rocksdb.write_buffer_manager_bytes > 0) {
      storage_options.rocksdb.shared_write_buffer_manager =
          std::make_shared<rocksdb::WriteBufferManager>(
              static_cast<size_t>(storage_options.rocksdb.write_buffer_manager_bytes),
              storage_options.rocksdb.shared_block_cache);
    }
  }
  std::shared_ptr<FaultInjectionFileSystem> faulty_disk;
  if (o.disk_fault_rate > 0) {
    faulty_disk = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
    faulty_disk->SetFailureSeed(o.shard_id);
    storage_options.rocksdb.file_system = faulty_disk;
  }
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<ShardStorage> storage,
                         ShardStorage::Open(storage_options));
  // Compaction yields to pulls and pushes (background_lane.h; the threads apply it at
  // their next job). Process-wide: Env::Default's pool serves this shard's one database.
  if (o.compaction_priority != BackgroundPriority::kNormal) {
    const rocksdb::Status lowered = rocksdb::Env::Default()->LowerThreadPoolCPUPriority(
        rocksdb::Env::LOW, o.compaction_priority == BackgroundPriority::kIdle
                               ? rocksdb::CpuPriority::kIdle
                               : rocksdb::CpuPriority::kLow);
    if (!lowered.ok()) {
      EMBER_LOG(WARNING) << "--compaction_priority: " << lowered.ToString();
    }
  }

  // Metrics, when enabled. The registry and PsMetrics outlive the service; the metrics
  // server (and with it every scrape) is declared after the service, so it ends first.
  const bool metrics_enabled = o.server.metrics_port >= 0;
  auto registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<PsMetrics> metrics;
  if (metrics_enabled) metrics = std::make_unique<PsMetrics>(*registry);

  std::vector<uint32_t> shards(o.num_shards);
  for (uint32_t i = 0; i < o.num_shards; ++i) shards[i] = i;
  // With a coordinator the shard owns nothing until the coordinator's map arrives.
  PsServiceImpl service(storage->store(), o.shard_id,
                        o.coordinator.empty() ? SlotMap::Even(shards, /*epoch=*/1) : SlotMap(),
                        PsServiceImpl::kDefaultDedupWindow, metrics.get(), o.max_batch_keys);
  service.EnableCheckpoints(storage.get());
  // Jobs' own stores (docs/ARCHITECTURE.md "Several jobs per PS cluster"): each in
  // <data_dir>.jobs/<job>/db, with the default store's options; those found are opened
  // now, so a restarted shard serves them as before.
  const std::string jobs_dir = o.data_dir + ".jobs";
  service.EnableJobStores([storage_options, jobs_dir](const std::string& job)
                              -> absl::StatusOr<std::unique_ptr<ShardStorage>> {
    ShardStorageOptions options = storage_options;
    const std::filesystem::path dir = std::filesystem::path(jobs_dir) / job;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
    }
    options.rocksdb.path = (dir / "db").string();
    return ShardStorage::Open(options);
  });
  EMBER_RETURN_IF_ERROR(OpenJobStores(jobs_dir, service));
  EMBER_ASSIGN_OR_RETURN(const TlsCredentials tls, TlsCredentials::Load(o.security.tls));
  service.RequireAdmin(o.admin);
  service.RequireClusterToken(o.cluster_token);
  service.SetPeerCredentials(tls.Channel());
  service.SetHotKeyOptions(o.hot_keys);
  service.SetMigrationCopyPriority(o.migration_copy_priority);
  bool bound_inflight = false;
  InflightLimits inflight =
      InflightLimitsFrom(o.bounds, storage_options.store.memory_budget_bytes, &bound_inflight);
  if (o.memory_limit_mb > 0) {
    inflight.max_bytes = o.shares.max_inflight_bytes;
    bound_inflight = true;
    service.SetReplicaBytesLimit(o.shares.replicas);
  }
  if (bound_inflight) service.SetInflightLimits(inflight);
  service.SetWatchLimits(WatchLimitsFrom(o.bounds));
  if (o.crash_on_migration_count > 0) {
    service.CrashOnMigrationCall(o.crash_on_migration_method, o.crash_on_migration_count);
  }

  std::shared_ptr<PsStoreCollector> collector;
  std::shared_ptr<PsJobStoresCollector> job_collector;
  std::shared_ptr<MemoryLimitCollector> memory_collector;
  std::unique_ptr<MetricsServer> metrics_server;
  if (metrics_enabled) {
    // The service hands the collector its current store: a restore replaces it.
    collector = std::make_shared<PsStoreCollector>(
        [&service](const PsStoreCollector::Visitor& visit) { service.WithStore(visit); });
    EMBER_ASSIGN_OR_RETURN(metrics_server,
                           MetricsServer::Start(o.server.metrics_host, o.server.metrics_port));
    job_collector = std::make_shared<PsJobStoresCollector>(
        [&service](const PsJobStoresCollector::Visitor& visit) {
          service.WithEachJobStore(visit);
        });
    metrics_server->Register(registry);
    metrics_server->Register(collector);
    metrics_server->Register(job_collector);
    if (o.memory_limit_mb > 0) {
      memory_collector = std::make_shared<MemoryLimitCollector>(
          o.shares, [&service, &o] { return MemoryUseOf(service, o.shares); });
      metrics_server->Register(memory_collector);
    }
  }

  ServeOptions serve = ServeOptionsFrom(o.server);
  serve.credentials = tls.Server();
  serve.services = {&service};
  serve.health_service = v1::PsService::service_full_name();
  serve.health_port = o.security.health_port;
  serve.max_receive_message_bytes = static_cast<int>(o.max_message_mb << 20);
  serve.max_send_message_bytes = static_cast<int>(o.max_message_mb << 20);
  serve.metrics = metrics_server.get();
  serve.configure = [&o](grpc::ServerBuilder* builder) {
    ApplyConnectionBounds(o.bounds, builder);
  };
  // A listener that stopped accepting stops the shard, which then exits 75 (below).
  std::unique_ptr<ListenerCheck> listener_check;
  absl::Notification listener_broken;
  std::unique_ptr<ShardAgent> agent;
  std::unique_ptr<DiskFaultWindow> disk_faults;
  ServeHooks hooks;
  hooks.started = [&](int port) -> absl::Status {
    if (o.coordinator.empty()) return absl::OkStatus();
    ShardAgentOptions agent_options;
    agent_options.coordinator_address = o.coordinator;
    agent_options.shard_id = o.shard_id;
    agent_options.advertised_address =
        o.advertise_address.empty() ? absl::StrCat(o.server.host, ":", port) : o.advertise_address;
    agent_options.heartbeat_interval = absl::Milliseconds(o.heartbeat_ms);
    agent_options.incarnation = service.incarnation();
    agent_options.channel_credentials = tls.Channel();
    agent_options.admin_token = o.admin.token;
    agent_options.cluster_token = o.cluster_token;
    agent = std::make_unique<ShardAgent>(
        agent_options, [&service](const SlotMap& map) { service.SetSlotMap(map); },
        [&service](const std::string& job, const v1::TableConfig& config) {
          v1::CreateTableRequest request;
          *request.mutable_config() = config;
          request.set_job(job);
          v1::CreateTableResponse response;
          return service.DoCreateTable(request, &response);
        },
        [&service]() { return service.version(); },
        [&service, n = o.heavy_hitters_report]() { return service.HotKeyReport(n); },
        [&service](const v1::HotSet& hot_set) { service.ApplyHotSet(hot_set); });
    return agent->Start();
  };
  hooks.ready = [&](int port) {
    listener_check = StartListenerCheck(o.bounds, o.server.host, port, &listener_broken);
    if (faulty_disk != nullptr) {
      const absl::Duration after = absl::Milliseconds(o.disk_faults_after_ms);
      absl::Duration duration = absl::Milliseconds(o.disk_faults_for_ms);
      if (o.disk_faults_until_unix_ms > 0) {
        const absl::Duration left = absl::FromUnixMillis(o.disk_faults_until_unix_ms) - absl::Now();
        if (duration == absl::ZeroDuration() || left - after < duration) duration = left - after;
      }
      // A window that has already closed (a restart after it) injects nothing.
      if (o.disk_faults_until_unix_ms == 0 || duration > absl::ZeroDuration()) {
        disk_faults =
            std::make_unique<DiskFaultWindow>(faulty_disk, o.disk_fault_rate, after, duration);
      }
    }
    EMBER_LOG(INFO) << "shard " << o.shard_id
                    << (o.coordinator.empty()
                            ? absl::StrCat(" of ", o.num_shards, " (static slot map)")
                            : absl::StrCat(" (coordinator ", o.coordinator, ")"))
                    << " serving " << o.data_dir << " on " << o.server.host << ":" << port
                    << (tls.enabled() ? " (mutual TLS)" : " (plaintext)");
  };
  hooks.draining = [&] { return DrainShard(o.drain, agent.get()); };
  hooks.stopping = [&] {
    if (listener_check != nullptr) listener_check->Stop();
    if (agent != nullptr) agent->Stop();
    service.StopWatches();
  };
  bool flushed = false;  // the store is closed: the destructors have nothing left to save
  hooks.stopped = [&]() -> absl::Status {
    service.StopReplication();  // its background copies read the store
    disk_faults.reset();        // the flush below runs on a healthy disk
    const absl::Status closed = storage->Close();
    metrics_server.reset();  // no scrape reads the store from here on
    if (!closed.ok()) return closed;
    flushed = true;
    EMBER_LOG(INFO) << "flushed and closed";
    return absl::OkStatus();
  };
  const absl::Status served = ServeUntilStopped(serve, hooks);
  if (listener_broken.HasBeenNotified()) {
    EMBER_LOG(ERROR) << "exiting " << kExitRestartMe << " (restart me): the listener broke"
                     << (served.ok() ? "" : absl::StrCat("; ", served.message()));
    std::_Exit(kExitRestartMe);
  }
  if (flushed) ExitAfterServing("ember-ps", served);
  return served;
}

}  // namespace
}  // namespace ember

int main(int argc, char** argv) {
  return ember::RunMain<ember::PsMainOptions>(
      {"ember-ps", "ps", ember::DeclareFlags, ember::FinishFlags, ember::Run}, argc, argv);
}
