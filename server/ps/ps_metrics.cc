// Copyright 2026 The Ember Authors.

#include "server/ps/ps_metrics.h"

#include <memory>
#include <string>
#include <utility>

#include "common/metric_families.h"
#include "rocksdb/db.h"
#include "rocksdb/statistics.h"

namespace ember {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& registry,
                                                       const std::string& name,
                                                       const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

}  // namespace

PsMetrics::PsMetrics(prometheus::Registry& registry, Clock* clock)
    : clock_(clock),
      rpcs_(registry),
      pull_(rpcs_.Method("Pull")),
      push_(rpcs_.Method("Push")),
      create_table_(rpcs_.Method("CreateTable")),
      get_shard_info_(rpcs_.Method("GetShardInfo")),
      checksum_(rpcs_.Method("Checksum")),
      checkpoint_shard_(rpcs_.Method("CheckpointShard")),
      restore_shard_(rpcs_.Method("RestoreShard")),
      received_bytes_(CounterFamily(registry, "ember_rpc_received_bytes_total",
                                    "Request message bytes received, by method.")),
      sent_bytes_(CounterFamily(registry, "ember_rpc_sent_bytes_total",
                                "Response message bytes sent, by method.")),
      rows_pulled_(CounterFamily(registry, "ember_rows_pulled_total",
                                 "Ids served by successful pulls, by table.")),
      rows_pushed_(CounterFamily(registry, "ember_rows_pushed_total",
                                 "Ids applied by successful pushes, by table.")),
      push_duplicates_(CounterFamily(registry, "ember_push_duplicates_total",
                                     "Retried pushes answered without re-applying them.")
                           .Add({})),
      epoch_(prometheus::BuildGauge()
                 .Name("ember_slot_map_epoch")
                 .Help("Epoch of the slot map this shard routes by.")
                 .Register(registry)
                 .Add({})),
      watch_streams_(prometheus::BuildGauge()
                         .Name("ember_watch_streams")
                         .Help("Update streams (WatchUpdates) open now.")
                         .Register(registry)
                         .Add({})),
      watch_messages_(CounterFamily(registry, "ember_watch_messages_total",
                                    "Update stream messages sent (progress marks included).")
                          .Add({})),
      watch_rows_(CounterFamily(registry, "ember_watch_rows_total",
                                "Rows and tombstones sent on update streams.")
                      .Add({})),
      watch_bytes_(CounterFamily(registry, "ember_watch_sent_bytes_total",
                                 "Bytes of update stream messages sent.")
                       .Add({})),
      watch_refused_(CounterFamily(registry, "ember_watch_refused_total",
                                   "Update streams refused: --max_watches or "
                                   "--max_watches_per_peer reached.")
                         .Add({})),
      watch_stalled_(CounterFamily(registry, "ember_watch_stalled_total",
                                   "Update streams closed because their reader made no "
                                   "progress for --watch_stall_timeout_ms.")
                         .Add({})),
      replica_pulled_(CounterFamily(registry, "ember_replica_pulled_keys_total",
                                    "Keys answered from replicas of hot keys (replica reads).")
                          .Add({})),
      replica_missing_(CounterFamily(registry, "ember_replica_missing_keys_total",
                                     "Replica-read keys not answered (replica_missing).")
                           .Add({})),
      replica_rows_(prometheus::BuildGauge()
                        .Name("ember_replica_rows")
                        .Help("Replica copies of other shards' hot rows held now.")
                        .Register(registry)
                        .Add({})),
      replica_copies_(CounterFamily(registry, "ember_replica_copies_total",
                                    "PutReplicas attempts made as the owner of hot keys.")),
      replica_copies_ok_(replica_copies_.Add({{"result", "ok"}})),
      replica_copies_error_(replica_copies_.Add({{"result", "error"}})),
      replica_copied_rows_(CounterFamily(registry, "ember_replica_copied_rows_total",
                                         "Rows (and drops) sent in PutReplicas attempts.")
                               .Add({})),
      hot_set_version_(prometheus::BuildGauge()
                           .Name("ember_hot_set_version")
                           .Help("Version of the hot set this shard applies (0: none).")
                           .Register(registry)
                           .Add({})),
      hot_keys_(prometheus::BuildGauge()
                    .Name("ember_hot_keys")
                    .Help("Keys in the hot set this shard applies, over all tables.")
                    .Register(registry)
                    .Add({})),
      hot_key_rate_(prometheus::BuildGauge()
                        .Name("ember_hot_key_rate")
                        .Help("Rates (keys/s) of this shard's top heavy hitters at the last "
                              "report, by table and rank.")
                        .Register(registry)) {}

void PsMetrics::CountReplicaPull(uint64_t answered, uint64_t missing) {
  if (answered > 0) replica_pulled_.Increment(static_cast<double>(answered));
  if (missing > 0) replica_missing_.Increment(static_cast<double>(missing));
}

void PsMetrics::CountReplicaCopy(bool ok, uint64_t rows) {
  (ok ? replica_copies_ok_ : replica_copies_error_).Increment();
  replica_copied_rows_.Increment(static_cast<double>(rows));
}

void PsMetrics::SetHotSet(uint64_t version, uint64_t keys) {
  hot_set_version_.Set(static_cast<double>(version));
  hot_keys_.Set(static_cast<double>(keys));
}

void PsMetrics::SetHotKeyRates(absl::string_view table, const std::vector<double>& rates) {
  const std::string t(table);
  for (int rank = 1; rank <= kHotKeyRanks; ++rank) {
    const double rate = static_cast<size_t>(rank) <= rates.size() ? rates[rank - 1] : 0.0;
    hot_key_rate_.Add({{"table", t}, {"rank", std::to_string(rank)}}).Set(rate);
  }
}

void PsMetrics::CountWatchMessage(uint64_t rows, uint64_t bytes) {
  watch_messages_.Increment();
  watch_rows_.Increment(static_cast<double>(rows));
  watch_bytes_.Increment(static_cast<double>(bytes));
}

void PsMetrics::CountBytes(absl::string_view method, uint64_t received, uint64_t sent) {
  const std::string m(method);
  received_bytes_.Add({{"method", m}}).Increment(static_cast<double>(received));
  sent_bytes_.Add({{"method", m}}).Increment(static_cast<double>(sent));
}

void PsMetrics::CountRowsPulled(absl::string_view table, uint64_t rows) {
  rows_pulled_.Add({{"table", std::string(table)}}).Increment(static_cast<double>(rows));
}

void PsMetrics::CountRowsPushed(absl::string_view table, uint64_t rows) {
  rows_pushed_.Add({{"table", std::string(table)}}).Increment(static_cast<double>(rows));
}

PsStoreCollector::PsStoreCollector(const EmbeddingStore* store, const RocksDbBackend* rocksdb)
    : source_([store, rocksdb](const Visitor& visit) { visit(*store, rocksdb); }) {}

std::vector<MetricFamily> PsStoreCollector::Collect() const {
  std::vector<MetricFamily> out;
  source_([&out](const EmbeddingStore& store, const RocksDbBackend* rocksdb) {
    CollectStore(store, &out);
    if (rocksdb != nullptr) CollectRocksDb(*rocksdb, &out);
  });
  return out;
}

void PsStoreCollector::CollectStore(const EmbeddingStore& store, std::vector<MetricFamily>* out) {
  const StoreStats s = store.Stats();
  FamilyWriter w(out);
  w.Gauge("ember_store_version", "Version of the newest update applied by this shard.",
          static_cast<double>(s.version));
  w.Gauge("ember_memory_bytes", "Bytes charged to the memory tier's budget.",
          static_cast<double>(s.memory_bytes));
  w.Gauge("ember_memory_held_bytes", "Exact bytes held by the memory tier.",
          static_cast<double>(s.memory_held_bytes));
  w.Gauge("ember_memory_budget_bytes", "Memory tier budget in bytes; 0 means unlimited.",
          static_cast<double>(s.memory_budget_bytes));
  std::vector<std::pair<std::string, double>> rows, bytes;
  for (const TableStats& t : s.tables) {
    rows.emplace_back(t.name, static_cast<double>(t.rows_in_memory));
    bytes.emplace_back(t.name, static_cast<double>(t.held_bytes));
  }
  w.Labelled("ember_memory_rows", "Rows held in the memory tier, by table.", MetricType::Gauge,
             "table", rows);
  w.Labelled("ember_memory_table_bytes", "Bytes held by the memory tier, by table.",
             MetricType::Gauge, "table", bytes);
  w.Counter("ember_memory_hits_total", "Keys found in the memory tier.",
            static_cast<double>(s.memory_hits));
  w.Counter("ember_memory_misses_total", "Keys looked up in the backend.",
            static_cast<double>(s.memory_misses));
  w.Counter("ember_memory_not_admitted_total",
            "Misses answered from the backend without entering the memory tier (a colder "
            "ID than the row it would push out).",
            static_cast<double>(s.memory_not_admitted));
  const uint64_t lookups = s.memory_hits + s.memory_misses;
  w.Gauge("ember_memory_hit_ratio", "Memory tier hits / lookups since start (0 before any lookup).",
          lookups == 0 ? 0.0 : static_cast<double>(s.memory_hits) / static_cast<double>(lookups));
  w.Counter("ember_store_pulled_keys_total", "Keys pulled from the store.",
            static_cast<double>(s.pulled_keys));
  w.Counter("ember_store_pushed_keys_total", "Keys pushed to the store.",
            static_cast<double>(s.pushed_keys));
  w.Counter("ember_admitted_rows_total", "Rows created by admission.",
            static_cast<double>(s.admitted));
  w.Counter("ember_rejected_unadmitted_keys_total",
            "Pushed keys dropped because admission had not admitted them yet.",
            static_cast<double>(s.rejected_unadmitted));
  w.Labelled("ember_evicted_rows_total",
             "Rows dropped from memory: reason=memory (written back if dirty, still stored) "
             "or reason=policy (TTL/frequency, removed).",
             MetricType::Counter, "reason",
             {{"memory", static_cast<double>(s.evicted_to_backend)},
              {"policy", static_cast<double>(s.evicted_by_policy)}});
  w.Counter("ember_writeback_errors_total", "Failed write-backs of dirty rows.",
            static_cast<double>(s.writeback_errors));
  w.Gauge("ember_disk_bytes", "Backend bytes on disk (SST files and live WAL).",
          static_cast<double>(s.disk_bytes));
}

std::vector<MetricFamily> PsJobStoresCollector::Collect() const {
  std::vector<std::pair<std::string, double>> version, rows_in_memory, memory_bytes, disk_bytes,
      stored_rows;
  source_([&](const std::string& job, const EmbeddingStore& store, const RocksDbBackend*) {
    const StoreStats s = store.Stats();
    version.emplace_back(job, static_cast<double>(s.version));
    uint64_t rows = 0;
    for (const TableStats& t : s.tables) rows += t.rows_in_memory;
    rows_in_memory.emplace_back(job, static_cast<double>(rows));
    memory_bytes.emplace_back(job, static_cast<double>(s.memory_held_bytes));
    disk_bytes.emplace_back(job, static_cast<double>(s.disk_bytes));
    stored_rows.emplace_back(job, static_cast<double>(store.EstimatedStoredRows()));
  });
  std::vector<MetricFamily> out;
  if (version.empty()) return out;
  FamilyWriter w(&out);
  w.Labelled("ember_job_store_version",
             "Version of the newest update applied to a job's own store on this shard.",
             MetricType::Gauge, "job", version);
  w.Labelled("ember_job_store_memory_rows",
             "Rows of a job's own tables held in the memory tier on this shard.", MetricType::Gauge,
             "job", rows_in_memory);
  w.Labelled("ember_job_store_memory_bytes",
             "Bytes the memory tier holds for a job's own tables on this shard (part of the "
             "shard's budget, ember_memory_budget_bytes).",
             MetricType::Gauge, "job", memory_bytes);
  w.Labelled("ember_job_store_disk_bytes",
             "Bytes on disk of a job's own store on this shard (SST files and live WAL).",
             MetricType::Gauge, "job", disk_bytes);
  w.Labelled("ember_job_store_rows",
             "Rows stored for a job's own tables on this shard (RocksDB's estimate).",
             MetricType::Gauge, "job", stored_rows);
  return out;
}

namespace {

// RocksDB's own figures, read from the open database.
void CollectRocksDbProperties(rocksdb::DB& db, FamilyWriter& w) {
  uint64_t value = 0;
  // Per-column-family estimates, summed over every column family.
  if (db.GetAggregatedIntProperty(rocksdb::DB::Properties::kEstimateNumKeys, &value)) {
    w.Gauge("ember_rocksdb_estimate_num_keys", "RocksDB's estimate of its keys.",
            static_cast<double>(value));
  }
  if (db.GetAggregatedIntProperty(rocksdb::DB::Properties::kEstimatePendingCompactionBytes,
                                  &value)) {
    w.Gauge("ember_rocksdb_pending_compaction_bytes",
            "RocksDB's estimate of bytes compaction must rewrite.", static_cast<double>(value));
  }
  // The block cache is shared by every column family: any one reports it.
  if (db.GetIntProperty(rocksdb::DB::Properties::kBlockCacheUsage, &value)) {
    w.Gauge("ember_rocksdb_block_cache_usage_bytes", "Bytes in RocksDB's block cache.",
            static_cast<double>(value));
  }
  if (db.GetIntProperty(rocksdb::DB::Properties::kBlockCacheCapacity, &value)) {
    w.Gauge("ember_rocksdb_block_cache_capacity_bytes", "Capacity of RocksDB's block cache.",
            static_cast<double>(value));
  }
  const std::shared_ptr<rocksdb::Statistics> stats = db.GetDBOptions().statistics;
  if (stats != nullptr) {
    w.Counter("ember_rocksdb_block_cache_hits_total", "RocksDB block cache hits.",
              static_cast<double>(stats->getTickerCount(rocksdb::BLOCK_CACHE_HIT)));
    w.Counter("ember_rocksdb_block_cache_misses_total", "RocksDB block cache misses.",
              static_cast<double>(stats->getTickerCount(rocksdb::BLOCK_CACHE_MISS)));
  }
}

}  // namespace

void PsStoreCollector::CollectRocksDb(const RocksDbBackend& rocksdb,
                                      std::vector<MetricFamily>* out) {
  FamilyWriter w(out);
  w.Counter("ember_rocksdb_reopens_total",
            "Reopens of the RocksDB database after a write error (WAL on).",
            static_cast<double>(rocksdb.reopens()));
  // Held open for the scrape: a reopen after a write error replaces the database.
  rocksdb.VisitDb([&w](rocksdb::DB& db) { CollectRocksDbProperties(db, w); });
}

}  // namespace ember
