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
// exit 0; exit 1 if the flush failed. Bad flags exit 2 with a message and the usage.
//
// Until a coordinator exists, the shard's slot map is SlotMap::Even over shard ids
// 0..num_shards-1 at epoch 1.
//
// Hot keys (proto/ember/v1/hotkeys.proto): the shard counts the keys it serves in
// per-table heavy hitters (--heavy_hitters_*); with --coordinator every heartbeat
// reports them and brings the published hot set back, which the shard applies
// (replica reads, PutReplicas, copies of its own hot rows to their holders).

#include <algorithm>
#include <cstdint>
#include <cstdio>
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
#include "common/flags.h"
#include "common/health.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/slot_map.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "prometheus/registry.h"
#include "server/store/embedding_store.h"
#include "server/store/fault_injection_fs.h"
#include "server/shared/graceful_shutdown.h"
#include "server/ps/heavy_hitters.h"
#include "server/ps/ps_metrics.h"
#include "server/ps/ps_service.h"
#include "server/ps/shard_agent.h"
#include "server/shared/shard_storage.h"
#include "server/store/rocksdb_backend.h"

namespace ember {
namespace {

constexpr char kUsage[] = R"(usage: ember-ps --data_dir=DIR [--flag=value ...]

  --data_dir=DIR           RocksDB directory of this shard. Required.
  --host=ADDR              address to bind. Default: 127.0.0.1
  --port=N                 port to bind; 0 picks a free one. Default: 0
  --shard_id=N             this shard's id. Default: 0
  --num_shards=N           shards in the (even) slot map, epoch 1, when there is no
                           coordinator. Default: 1
  --coordinator=HOST:PORT  register with this coordinator and take the slot map and
                           tables from it (then --num_shards is ignored). Default: none
  --advertise_address=A    host:port clients reach this shard at. Default: HOST:bound port
  --heartbeat_ms=N         coordinator heartbeat interval. Default: 500
  --memory_budget_mb=N     memory tier budget in MiB; 0 = unlimited. Default: 1024
  --wal=true|false         RocksDB write-ahead log. Default: true
  --block_cache_mb=N       RocksDB block cache in MiB, outside the memory budget.
                           Default: 256
  --write_buffer_mb=N      RocksDB memtable size in MiB, up to 3 per table, outside
                           the memory budget. Default: 64
  --max_message_mb=N       largest request/response in MiB; a larger request fails with
                           RESOURCE_EXHAUSTED. Default: 256
  --max_batch_keys=N       most ids per Pull or Push; more fail with INVALID_ARGUMENT.
                           Default: 1048576
  --change_log_entries=N   change-log entries kept in memory, in [1, 2^30] (32 bytes
                           each): how far back WatchUpdates, ExportChanges and delta
                           checkpoints reach. Default: 1048576
  --shutdown_grace_ms=N    time calls in flight get at shutdown. Default: 5000
  --metrics_port=N         serve Prometheus metrics at /metrics on this port; 0 picks
                           a free one, -1 disables. Default: -1 (disabled)
  --metrics_host=ADDR      address the metrics server binds. Default: --host
  --test_crash_after_checkpoints=N
                           fault tests only: SIGKILL this process right after it
                           writes its Nth checkpoint snapshot. Default: 0 (never)
  --admin_token=TOKEN      require an admin credential on the calls only the
                           coordinator and other shards make (slot migration,
                           CheckpointShard, RestoreShard, PutReplicas): this token
                           (metadata ember-admin-token; give the coordinator the
                           same one) or an --admin_identities certificate.
                           Default: none (not required without TLS)
  --admin_token_file=FILE  read the token from FILE
  --admin_identities=A,B   client-certificate common names with the admin role
                           (e.g. ember-admin,ember-server). With TLS, a token or
                           identities are required: a worker's certificate must not
                           move slots.
  --heavy_hitters_capacity=N
                           keys tracked per table for the hot-key reports (a
                           Space-Saving summary, server/ps/heavy_hitters.h). Default: 256
  --heavy_hitters_half_life_s=S
                           half-life of the decayed key rates, in seconds. Default: 10
  --heavy_hitters_sample=N record each pulled key with probability 1/N (weight N,
                           unbiased); 1 records every key. Default: 16
  --heavy_hitters_report=N keys per table in each heartbeat's report and in
                           GetShardInfo. Default: 32
  --test_crash_on_migration=METHOD:N
                           fault tests only: SIGKILL this process when its Nth call
                           of the slot-migration RPC METHOD (ExportRows,
                           ExportChanges, ImportRows, FenceSlots, DropSlots,
                           InstallSlotMap) arrives. Default: none
  --test_disk_fault_rate=P fault tests only: fail this share (0 to 1) of RocksDB's
                           file reads and writes with an IO error
                           (server/store/fault_injection_fs.h), from
                           --test_disk_faults_after_ms after the shard serves, for
                           --test_disk_faults_for_ms (0: until shutdown; the flush
                           at shutdown runs without faults). Default: 0 (none)
  --test_disk_faults_after_ms=N, --test_disk_faults_for_ms=N
                           the window of --test_disk_fault_rate. Default: 0, 0
  --test_disk_faults_until_unix_ms=T
                           and no faults after this wall-clock time (ms since
                           1970), also in a restarted process. Default: 0 (none)
  --help                   this text
)";

struct PsMainOptions {
  std::string data_dir;
  std::string host = "127.0.0.1";
  uint32_t port = 0;
  uint32_t shard_id = 0;
  uint32_t num_shards = 1;
  std::string coordinator;
  std::string advertise_address;
  int64_t heartbeat_ms = 500;
  int64_t memory_budget_mb = 1024;
  bool wal = true;
  int64_t block_cache_mb = 256;
  int64_t write_buffer_mb = 64;
  int64_t max_message_mb = 256;
  uint32_t max_batch_keys = StoreOptions().max_batch_keys;
  uint64_t change_log_entries = StoreOptions().change_log_capacity;
  int64_t shutdown_grace_ms = 5000;
  int32_t metrics_port = -1;  // -1: no metrics server
  std::string metrics_host;   // empty: `host`
  int crash_after_checkpoints = 0;
  ServerSecurityFlags security;
  AdminPolicy admin;  // from security
  std::string crash_on_migration_method;
  int crash_on_migration_count = 0;
  size_t heavy_hitters_capacity = HeavyHittersOptions().capacity;
  double heavy_hitters_half_life_s = absl::ToDoubleSeconds(HeavyHittersOptions().half_life);
  uint32_t heavy_hitters_sample = HeavyHittersOptions().sample_every;
  size_t heavy_hitters_report = 32;
  double disk_fault_rate = 0;
  int64_t disk_faults_after_ms = 0;
  int64_t disk_faults_for_ms = 0;
  int64_t disk_faults_until_unix_ms = 0;
};

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

absl::StatusOr<PsMainOptions> ParseFlags(const std::vector<Flag>& flags) {
  PsMainOptions o;
  for (const Flag& flag : flags) {
    const absl::string_view name = flag.name;
    if (name == "wal") {
      EMBER_RETURN_IF_ERROR(ParseBool(flag, &o.wal));
    } else if (name == "block_cache_mb") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.block_cache_mb));
    } else if (name == "write_buffer_mb") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.write_buffer_mb));
    } else if (name == "data_dir") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.data_dir));
    } else if (name == "host") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.host));
    } else if (name == "port") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.port));
    } else if (name == "shard_id") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.shard_id));
    } else if (name == "num_shards") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.num_shards));
    } else if (name == "coordinator") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.coordinator));
    } else if (name == "advertise_address") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.advertise_address));
    } else if (name == "heartbeat_ms") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.heartbeat_ms));
    } else if (name == "memory_budget_mb") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.memory_budget_mb));
    } else if (name == "max_message_mb") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.max_message_mb));
    } else if (name == "max_batch_keys") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.max_batch_keys));
    } else if (name == "change_log_entries") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.change_log_entries));
    } else if (name == "shutdown_grace_ms") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.shutdown_grace_ms));
    } else if (name == "metrics_port") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.metrics_port));
    } else if (name == "test_crash_after_checkpoints") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.crash_after_checkpoints));
    } else if (absl::Status s; ParseServerSecurityFlag(flag, &o.security, &s)) {
      EMBER_RETURN_IF_ERROR(s);
    } else if (name == "test_crash_on_migration") {
      EMBER_RETURN_IF_ERROR(RequireValue(flag));
      const size_t colon = flag.value.rfind(':');
      Flag count{flag.name, colon == absl::string_view::npos ? "" : flag.value.substr(colon + 1),
                 true};
      if (colon == absl::string_view::npos || colon == 0 ||
          !ParseNumber(count, &o.crash_on_migration_count).ok() || o.crash_on_migration_count < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--test_crash_on_migration: expected METHOD:N with N >= 1, got '", flag.value, "'"));
      }
      o.crash_on_migration_method = std::string(flag.value.substr(0, colon));
    } else if (name == "metrics_host") {
      EMBER_RETURN_IF_ERROR(ParseString(flag, &o.metrics_host));
    } else if (name == "heavy_hitters_capacity") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.heavy_hitters_capacity));
    } else if (name == "heavy_hitters_half_life_s") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.heavy_hitters_half_life_s));
    } else if (name == "heavy_hitters_sample") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.heavy_hitters_sample));
    } else if (name == "heavy_hitters_report") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.heavy_hitters_report));
    } else if (name == "test_disk_fault_rate") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.disk_fault_rate));
    } else if (name == "test_disk_faults_after_ms") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.disk_faults_after_ms));
    } else if (name == "test_disk_faults_for_ms") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.disk_faults_for_ms));
    } else if (name == "test_disk_faults_until_unix_ms") {
      EMBER_RETURN_IF_ERROR(ParseNumber(flag, &o.disk_faults_until_unix_ms));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
  }
  if (o.data_dir.empty()) return absl::InvalidArgumentError("--data_dir is required");
  if (o.port > 65535) return absl::InvalidArgumentError("--port must be <= 65535");
  if (o.num_shards == 0) return absl::InvalidArgumentError("--num_shards must be >= 1");
  if (o.heartbeat_ms <= 0) return absl::InvalidArgumentError("--heartbeat_ms must be > 0");
  if (o.coordinator.empty() && o.shard_id >= o.num_shards) {
    return absl::InvalidArgumentError("--shard_id must be < --num_shards");
  }
  if (o.memory_budget_mb < 0 || o.memory_budget_mb > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError("--memory_budget_mb must be in [0, 2^40]");
  }
  if (o.block_cache_mb < 1 || o.block_cache_mb > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError("--block_cache_mb must be in [1, 2^20]");
  }
  if (o.write_buffer_mb < 1 || o.write_buffer_mb > 4096) {
    return absl::InvalidArgumentError("--write_buffer_mb must be in [1, 4096]");
  }
  if (o.max_message_mb < 1 || o.max_message_mb > 2047) {
    return absl::InvalidArgumentError("--max_message_mb must be in [1, 2047]");
  }
  if (o.max_batch_keys == 0) return absl::InvalidArgumentError("--max_batch_keys must be >= 1");
  if (o.change_log_entries < 1 || o.change_log_entries > (uint64_t{1} << 30)) {
    return absl::InvalidArgumentError("--change_log_entries must be in [1, 2^30]");
  }
  if (o.shutdown_grace_ms < 0) return absl::InvalidArgumentError("--shutdown_grace_ms < 0");
  if (o.metrics_port < -1 || o.metrics_port > 65535) {
    return absl::InvalidArgumentError("--metrics_port must be in [-1, 65535]");
  }
  if (o.metrics_host.empty()) o.metrics_host = o.host;
  if (o.heavy_hitters_capacity > (size_t{1} << 20)) {
    return absl::InvalidArgumentError("--heavy_hitters_capacity must be in [0, 2^20]");
  }
  if (!(o.heavy_hitters_half_life_s > 0 && o.heavy_hitters_half_life_s <= 86400)) {
    return absl::InvalidArgumentError("--heavy_hitters_half_life_s must be in (0, 86400]");
  }
  if (o.heavy_hitters_sample < 1) {
    return absl::InvalidArgumentError("--heavy_hitters_sample must be >= 1");
  }
  if (o.heavy_hitters_report > 4096) {
    return absl::InvalidArgumentError("--heavy_hitters_report must be in [0, 4096]");
  }
  if (!(o.disk_fault_rate >= 0 && o.disk_fault_rate <= 1)) {
    return absl::InvalidArgumentError("--test_disk_fault_rate must be in [0, 1]");
  }
  if (o.disk_faults_after_ms < 0 || o.disk_faults_for_ms < 0 || o.disk_faults_until_unix_ms < 0) {
    return absl::InvalidArgumentError("--test_disk_faults_* must be >= 0");
  }
  EMBER_ASSIGN_OR_RETURN(
      o.admin,
      CheckServerSecurityFlags(
          o.security, "any certificate of the CA (a worker's) could move this shard's slots"));
  return o;
}

absl::Status Run(const PsMainOptions& o) {
  BlockStopSignals();  // before any thread starts

  ShardStorageOptions storage_options;
  storage_options.rocksdb.path = o.data_dir;
  storage_options.rocksdb.enable_wal = o.wal;
  storage_options.rocksdb.block_cache_bytes = o.block_cache_mb << 20;
  storage_options.rocksdb.write_buffer_bytes = o.write_buffer_mb << 20;
  storage_options.store.memory_budget_bytes = o.memory_budget_mb << 20;
  storage_options.store.max_batch_keys = o.max_batch_keys;
  storage_options.store.change_log_capacity = o.change_log_entries;
  storage_options.crash_after_checkpoints = o.crash_after_checkpoints;
  std::shared_ptr<FaultInjectionFileSystem> faulty_disk;
  if (o.disk_fault_rate > 0) {
    faulty_disk = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
    faulty_disk->SetFailureSeed(o.shard_id);
    storage_options.rocksdb.file_system = faulty_disk;
  }
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<ShardStorage> storage,
                         ShardStorage::Open(storage_options));

  // Metrics, when enabled. The registry and PsMetrics outlive the service; the metrics
  // server (and with it every scrape) is declared after the service, so it ends first.
  const bool metrics_enabled = o.metrics_port >= 0;
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
  EMBER_ASSIGN_OR_RETURN(const TlsCredentials tls, TlsCredentials::Load(o.security.tls));
  service.RequireAdmin(o.admin);
  service.SetPeerCredentials(tls.Channel());
  HotKeyOptions hot_keys;
  hot_keys.heavy_hitters.capacity = o.heavy_hitters_capacity;
  hot_keys.heavy_hitters.half_life = absl::Seconds(o.heavy_hitters_half_life_s);
  hot_keys.heavy_hitters.sample_every = o.heavy_hitters_sample;
  hot_keys.shard_info_top_n = o.heavy_hitters_report;
  hot_keys.owner.sender.max_message_bytes = static_cast<int>(o.max_message_mb << 20);
  service.SetHotKeyOptions(hot_keys);
  if (o.crash_on_migration_count > 0) {
    service.CrashOnMigrationCall(o.crash_on_migration_method, o.crash_on_migration_count);
  }

  std::shared_ptr<PsStoreCollector> collector;
  std::unique_ptr<MetricsServer> metrics_server;
  if (metrics_enabled) {
    // The service hands the collector its current store: a restore replaces it.
    collector = std::make_shared<PsStoreCollector>(
        [&service](const PsStoreCollector::Visitor& visit) { service.WithStore(visit); });
    EMBER_ASSIGN_OR_RETURN(metrics_server, MetricsServer::Start(o.metrics_host, o.metrics_port));
    metrics_server->Register(registry);
    metrics_server->Register(collector);
  }

  ServerCallTracker calls;
  EnableHealthService();
  grpc::ServerBuilder builder;
  calls.Install(&builder);
  int port = 0;
  builder.AddListeningPort(absl::StrCat(o.host, ":", o.port), tls.Server(), &port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(o.max_message_mb << 20));
  builder.SetMaxSendMessageSize(static_cast<int>(o.max_message_mb << 20));
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", o.host, ":", o.port));
  }
  HealthReporter health(server.get(), v1::PsService::service_full_name());
  EMBER_ASSIGN_OR_RETURN(const int health_port, health.ServeProbes(o.host, o.security.health_port));
  std::unique_ptr<ShardAgent> agent;
  if (!o.coordinator.empty()) {
    ShardAgentOptions agent_options;
    agent_options.coordinator_address = o.coordinator;
    agent_options.shard_id = o.shard_id;
    agent_options.advertised_address =
        o.advertise_address.empty() ? absl::StrCat(o.host, ":", port) : o.advertise_address;
    agent_options.heartbeat_interval = absl::Milliseconds(o.heartbeat_ms);
    agent_options.incarnation = service.incarnation();
    agent_options.channel_credentials = tls.Channel();
    agent_options.admin_token = o.admin.token;
    agent = std::make_unique<ShardAgent>(
        agent_options, [&service](const SlotMap& map) { service.SetSlotMap(map); },
        [&service](const v1::TableConfig& config) {
          v1::CreateTableRequest request;
          *request.mutable_config() = config;
          v1::CreateTableResponse response;
          return service.DoCreateTable(request, &response);
        },
        [&service]() { return service.version(); },
        [&service, n = o.heavy_hitters_report]() { return service.HotKeyReport(n); },
        [&service](const v1::HotSet& hot_set) { service.ApplyHotSet(hot_set); });
    EMBER_RETURN_IF_ERROR(agent->Start());
  }
  health.SetReady(true);
  std::cout << "listening on " << o.host << ":" << port << std::endl;
  if (metrics_server != nullptr)
    std::cout << "metrics on " << metrics_server->address() << std::endl;
  if (health_port >= 0) std::cout << "health on " << o.host << ":" << health_port << std::endl;
  std::unique_ptr<DiskFaultWindow> disk_faults;
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
                  << " serving " << o.data_dir << " on " << o.host << ":" << port
                  << (tls.enabled() ? " (mutual TLS)" : " (plaintext)");

  const int signal_number = WaitForStopSignal();
  EMBER_LOG(INFO) << "signal " << signal_number << ", shutting down";
  health.Shutdown();  // probes and load balancers stop sending first
  if (agent != nullptr) agent->Stop();
  // Calls in flight get the grace period; idle client connections do not hold it.
  service.StopWatches();
  ShutdownServer(server.get(), &calls, absl::Now() + absl::Milliseconds(o.shutdown_grace_ms));
  service.StopReplication();  // its background copies read the store
  disk_faults.reset();        // the flush below runs on a healthy disk
  const absl::Status closed = storage->Close();
  metrics_server.reset();  // no scrape reads the store from here on
  if (!closed.ok()) return closed;
  EMBER_LOG(INFO) << "flushed and closed";
  return absl::OkStatus();
}

}  // namespace
}  // namespace ember

int main(int argc, char** argv) {
  static const std::string* const usage =
      new std::string(absl::StrCat(ember::kUsage, ember::SecurityUsage(/*server=*/true)));
  return ember::RunMain<ember::PsMainOptions>("ember-ps", usage->c_str(), argc, argv,
                                              ember::ParseFlags, ember::Run);
}
