// Copyright 2026 The Ember Authors.
//
// PsMetrics: the Prometheus metrics of one PS shard.
//
// Two parts:
//  * PsMetrics holds the families the service updates as calls happen (registered in
//    the process's prometheus::Registry):
//      ember_rpc_latency_seconds{method}            histogram (RpcLatencyBuckets)
//      ember_rpc_total{method,code}                 counter, code = gRPC code name
//      ember_rpc_received_bytes_total{method}       counter, request message bytes
//      ember_rpc_sent_bytes_total{method}           counter, response message bytes
//      ember_rows_pulled_total{table}               counter, ids in successful pulls
//      ember_rows_pushed_total{table}               counter, ids in applied pushes
//      ember_push_duplicates_total                  counter, retried pushes not re-applied
//      ember_slot_map_epoch                         gauge, the shard's slot-map epoch
//      ember_replica_pulled_keys_total              counter, keys answered from replicas
//      ember_replica_missing_keys_total             counter, replica-read keys not answered
//      ember_replica_rows                           gauge, replica copies held
//      ember_replica_copies_total{result=ok|error}  counter, PutReplicas attempts made as
//                                                   the owner of hot keys
//      ember_replica_copied_rows_total              counter, rows sent in them (ok or not)
//      ember_hot_set_version                        gauge, the hot set the shard applies
//      ember_hot_keys                               gauge, keys in that hot set
//      ember_hot_key_rate{table,rank="1".."5"}      gauge, the shard's top heavy hitters'
//                                                   rates (keys/s) at the last report
//  * PsStoreCollector computes, at scrape time, what the store and RocksDB already
//    count (no refresher thread: a scrape reads the current values):
//      ember_store_version                          gauge, newest applied version
//      ember_memory_bytes / _held_bytes / _budget_bytes   gauges
//      ember_memory_rows{table}, ember_memory_table_bytes{table}  gauges
//      ember_memory_hits_total, ember_memory_misses_total          counters
//      ember_memory_not_admitted_total                              counter
//      ember_memory_hit_ratio                       gauge, hits / (hits + misses) since
//                                                   start, 0 before any lookup; use
//                                                   rate() of the counters for windows
//      ember_store_pulled_keys_total, ember_store_pushed_keys_total counters
//      ember_admitted_rows_total, ember_rejected_unadmitted_keys_total counters
//      ember_evicted_rows_total{reason="memory"|"policy"} counter
//      ember_writeback_errors_total                 counter
//      ember_disk_bytes                             gauge, SST + live WAL bytes
//      ember_rocksdb_estimate_num_keys              gauge (all column families)
//      ember_rocksdb_pending_compaction_bytes       gauge (all column families)
//      ember_rocksdb_block_cache_usage_bytes / _capacity_bytes  gauges
//      ember_rocksdb_block_cache_hits_total / _misses_total  counters, only when the
//                                                   DB was opened with statistics
//      ember_rocksdb_reopens_total                  counter, reopens after a write error
//    (the default store's: the shared tables)
//  * PsJobStoresCollector, the same way, for each job's own store (label `job`):
//      ember_job_store_rows, ember_job_store_memory_rows, ember_job_store_memory_bytes,
//      ember_job_store_disk_bytes, ember_job_store_version   gauges
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   PsMetrics metrics(*registry);
//   PsServiceImpl service(store, shard_id, map, kDefaultDedupWindow, &metrics);
//   auto collector = std::make_shared<PsStoreCollector>(store, rocksdb_backend);
//   metrics_server->Register(registry);
//   metrics_server->Register(collector);
//
// Thread-safety: all methods may be called concurrently.

#ifndef EMBER_SERVER_PS_PS_METRICS_H_
#define EMBER_SERVER_PS_PS_METRICS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "server/store/embedding_store.h"
#include "server/store/rocksdb_backend.h"

namespace ember {

class PsMetrics {
 public:
  // Registers the families in `registry`, which must outlive this object. RPC latencies
  // are measured with `clock` (not owned; default: the real one).
  explicit PsMetrics(prometheus::Registry& registry, Clock* clock = Clock::Real());

  PsMetrics(const PsMetrics&) = delete;
  PsMetrics& operator=(const PsMetrics&) = delete;

  // Per-method RPC metrics, one per PsService method.
  RpcMethodMetrics& pull() { return pull_; }
  RpcMethodMetrics& push() { return push_; }
  RpcMethodMetrics& create_table() { return create_table_; }
  RpcMethodMetrics& get_shard_info() { return get_shard_info_; }
  RpcMethodMetrics& checksum() { return checksum_; }
  RpcMethodMetrics& checkpoint_shard() { return checkpoint_shard_; }
  RpcMethodMetrics& restore_shard() { return restore_shard_; }
  // Any other method by name (slot migration calls).
  RpcMethodMetrics& method(absl::string_view name) { return rpcs_.Method(name); }

  // Message bytes received and sent by one call of `method`.
  void CountBytes(absl::string_view method, uint64_t received, uint64_t sent);
  // `rows` ids served by a successful pull / applied by a push to `table`.
  void CountRowsPulled(absl::string_view table, uint64_t rows);
  void CountRowsPushed(absl::string_view table, uint64_t rows);
  void CountPushDuplicate() { push_duplicates_.Increment(); }
  void SetEpoch(uint64_t epoch) { epoch_.Set(static_cast<double>(epoch)); }
  // Update streams (WatchUpdates): one opened / closed, and one message sent with `rows`
  // rows (tombstones included) of `bytes` bytes.
  void WatchOpened() { watch_streams_.Increment(); }
  void WatchClosed() { watch_streams_.Decrement(); }
  void CountWatchMessage(uint64_t rows, uint64_t bytes);
  // A stream refused (--max_watches, --max_watches_per_peer) or closed because its
  // reader made no progress (--watch_stall_timeout_ms).
  void CountWatchRefused() { watch_refused_.Increment(); }
  void CountWatchStalled() { watch_stalled_.Increment(); }
  // Hot keys (hotkeys.proto): keys answered and missed by replica reads; copies held;
  // one PutReplicas attempt of `rows` rows made as an owner; the applied hot set; the
  // heavy hitters' top rates of `table` (ranks beyond rates.size() read 0).
  void CountReplicaPull(uint64_t answered, uint64_t missing);
  void SetReplicaRows(uint64_t rows) { replica_rows_.Set(static_cast<double>(rows)); }
  void CountReplicaCopy(bool ok, uint64_t rows);
  void SetHotSet(uint64_t version, uint64_t keys);
  static constexpr int kHotKeyRanks = 5;
  void SetHotKeyRates(absl::string_view table, const std::vector<double>& rates);

  Clock* clock() const { return clock_; }

 private:
  Clock* const clock_;
  RpcMetrics rpcs_;
  RpcMethodMetrics& pull_;
  RpcMethodMetrics& push_;
  RpcMethodMetrics& create_table_;
  RpcMethodMetrics& get_shard_info_;
  RpcMethodMetrics& checksum_;
  RpcMethodMetrics& checkpoint_shard_;
  RpcMethodMetrics& restore_shard_;
  prometheus::Family<prometheus::Counter>& received_bytes_;
  prometheus::Family<prometheus::Counter>& sent_bytes_;
  prometheus::Family<prometheus::Counter>& rows_pulled_;
  prometheus::Family<prometheus::Counter>& rows_pushed_;
  prometheus::Counter& push_duplicates_;
  prometheus::Gauge& epoch_;
  prometheus::Gauge& watch_streams_;
  prometheus::Counter& watch_messages_;
  prometheus::Counter& watch_rows_;
  prometheus::Counter& watch_bytes_;
  prometheus::Counter& watch_refused_;
  prometheus::Counter& watch_stalled_;
  prometheus::Counter& replica_pulled_;
  prometheus::Counter& replica_missing_;
  prometheus::Gauge& replica_rows_;
  prometheus::Family<prometheus::Counter>& replica_copies_;
  prometheus::Counter& replica_copies_ok_;
  prometheus::Counter& replica_copies_error_;
  prometheus::Counter& replica_copied_rows_;
  prometheus::Gauge& hot_set_version_;
  prometheus::Gauge& hot_keys_;
  prometheus::Family<prometheus::Gauge>& hot_key_rate_;
};

// Reads EmbeddingStore::Stats() and RocksDB properties on every scrape.
class PsStoreCollector final : public prometheus::Collectable {
 public:
  // Neither is owned; both must outlive every scrape (unregister, or destroy the
  // MetricsServer, before destroying the store). `rocksdb` may be null (another
  // backend): the ember_rocksdb_* metrics are then absent.
  PsStoreCollector(const EmbeddingStore* store, const RocksDbBackend* rocksdb);

  // A store that can be replaced (a restore): `source` calls its argument with the
  // current store and RocksDB (may be null) while keeping them alive.
  using Visitor = std::function<void(const EmbeddingStore&, const RocksDbBackend*)>;
  using Source = std::function<void(const Visitor&)>;
  explicit PsStoreCollector(Source source) : source_(std::move(source)) {}

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  static void CollectStore(const EmbeddingStore& store, std::vector<prometheus::MetricFamily>* out);
  static void CollectRocksDb(const RocksDbBackend& rocksdb,
                             std::vector<prometheus::MetricFamily>* out);

  const Source source_;
};

// The stores of jobs with tables of their own (server/ps/job_store.h), on every scrape:
// one sample per job of what an operator sizes a shared shard by (rows, memory, disk,
// version). The default store's figures are PsStoreCollector's; the memory tier's
// budget and the block cache are shared by all stores and reported there once.
class PsJobStoresCollector final : public prometheus::Collectable {
 public:
  using Visitor =
      std::function<void(const std::string& job, const EmbeddingStore&, const RocksDbBackend*)>;
  // Calls its argument for every job's store (not the default one), keeping it alive.
  using Source = std::function<void(const Visitor&)>;
  explicit PsJobStoresCollector(Source source) : source_(std::move(source)) {}

  // No family while the shard holds no job store.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const Source source_;
};

}  // namespace ember

#endif  // EMBER_SERVER_PS_PS_METRICS_H_
