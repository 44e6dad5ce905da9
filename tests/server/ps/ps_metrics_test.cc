// Copyright 2026 The Ember Authors.
//
// In-process tests of the PS metrics (server/ps/ps_metrics.h, common/metrics.h): RPC
// latency buckets and status codes, per-table row counters updated by the service, the
// epoch gauge, and the scrape-time store collector.

#include "server/ps/ps_metrics.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/float16.h"
#include "common/metrics.h"
#include "common/slot_map.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "server/ps/ps_service.h"
#include "server/store/embedding_store.h"
#include "server/store/in_memory_backend.h"

namespace ember {
namespace {

using Labels = std::map<std::string, std::string>;

// The sample of family `name` with exactly `labels`, or null.
const prometheus::ClientMetric* Find(const std::vector<prometheus::MetricFamily>& families,
                                     const std::string& name, const Labels& labels) {
  for (const prometheus::MetricFamily& f : families) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      Labels got;
      for (const auto& l : m.label) got[l.name] = l.value;
      if (got == labels) return &m;
    }
  }
  return nullptr;
}

std::optional<double> CounterValue(const std::vector<prometheus::MetricFamily>& families,
                                   const std::string& name, const Labels& labels = {}) {
  const prometheus::ClientMetric* m = Find(families, name, labels);
  if (m == nullptr) return std::nullopt;
  return m->counter.value;
}

std::optional<double> GaugeValue(const std::vector<prometheus::MetricFamily>& families,
                                 const std::string& name, const Labels& labels = {}) {
  const prometheus::ClientMetric* m = Find(families, name, labels);
  if (m == nullptr) return std::nullopt;
  return m->gauge.value;
}

TEST(RpcMetricsTest, CodeNamesAreGrpcs) {
  EXPECT_EQ(GrpcCodeName(absl::StatusCode::kOk), "OK");
  EXPECT_EQ(GrpcCodeName(absl::StatusCode::kFailedPrecondition), "FAILED_PRECONDITION");
  EXPECT_EQ(GrpcCodeName(absl::StatusCode::kUnauthenticated), "UNAUTHENTICATED");
  EXPECT_EQ(GrpcCodeName(static_cast<absl::StatusCode>(99)), "UNKNOWN");
}

TEST(RpcMetricsTest, RecordsLatencyBucketsAndCodes) {
  prometheus::Registry registry;
  RpcMetrics rpcs(registry);
  RpcMethodMetrics& pull = rpcs.Method("Pull");
  EXPECT_EQ(&rpcs.Method("Pull"), &pull);
  pull.Record(absl::StatusCode::kOk, 40);         // < 50 us: first bucket
  pull.Record(absl::StatusCode::kOk, 3000);       // 3 ms: le=0.005
  pull.Record(absl::StatusCode::kNotFound, 7e6);  // 7 s: only +Inf
  const std::vector<prometheus::MetricFamily> families = registry.Collect();
  EXPECT_EQ(CounterValue(families, "ember_rpc_total", {{"method", "Pull"}, {"code", "OK"}}), 2);
  EXPECT_EQ(CounterValue(families, "ember_rpc_total", {{"method", "Pull"}, {"code", "NOT_FOUND"}}),
            1);
  const prometheus::ClientMetric* h =
      Find(families, "ember_rpc_latency_seconds", {{"method", "Pull"}});
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->histogram.sample_count, 3u);
  EXPECT_NEAR(h->histogram.sample_sum, 7.00304, 1e-9);
  const std::vector<double> bounds = RpcLatencyBuckets();
  ASSERT_EQ(h->histogram.bucket.size(), bounds.size() + 1);  // plus +Inf
  EXPECT_DOUBLE_EQ(bounds.front(), 50e-6);
  EXPECT_DOUBLE_EQ(bounds.back(), 5.0);
  for (size_t i = 0; i < bounds.size(); ++i) {
    const uint64_t want = bounds[i] < 0.003 ? 1 : 2;  // cumulative
    EXPECT_EQ(h->histogram.bucket[i].cumulative_count, want) << bounds[i];
  }
  EXPECT_EQ(h->histogram.bucket.back().cumulative_count, 3u);
}

class PsMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StoreOptions options;
    options.memory_budget_bytes = 1 << 20;
    absl::StatusOr<std::unique_ptr<EmbeddingStore>> store =
        EmbeddingStore::Open(options, std::make_unique<InMemoryBackend>());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    metrics_ = std::make_unique<PsMetrics>(registry_, &clock_);
    service_ = std::make_unique<PsServiceImpl>(store_.get(), 0, SlotMap::Even({0}, 3),
                                               PsServiceImpl::kDefaultDedupWindow, metrics_.get());
    v1::CreateTableRequest create;
    create.mutable_config()->set_name("item");
    create.mutable_config()->set_dim(2);
    create.mutable_config()->mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
    v1::CreateTableResponse created;
    ASSERT_TRUE(service_->DoCreateTable(create, &created).ok());
  }

  v1::PushRequest PushOf(std::vector<uint64_t> ids, uint64_t sequence) {
    v1::PushRequest r;
    r.set_table("item");
    r.set_ids(std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 8));
    std::string grads;
    AppendFloat32Bytes(std::vector<float>(ids.size() * 2, 1.0f), &grads);
    r.set_grads(grads);
    r.set_worker_id(1);
    r.set_sequence(sequence);
    r.set_epoch(3);
    return r;
  }

  FakeClock clock_;
  prometheus::Registry registry_;
  std::unique_ptr<EmbeddingStore> store_;
  std::unique_ptr<PsMetrics> metrics_;
  std::unique_ptr<PsServiceImpl> service_;
};

TEST_F(PsMetricsTest, ServiceCountsRowsDuplicatesAndEpoch) {
  v1::PushResponse pushed;
  ASSERT_TRUE(service_->DoPush(PushOf({1, 2, 3}, 1), &pushed).ok());
  ASSERT_TRUE(service_->DoPush(PushOf({1, 2, 3}, 1), &pushed).ok());  // a retry
  v1::PullRequest pull;
  pull.set_table("item");
  pull.set_ids(PushOf({4, 5}, 1).ids());
  pull.set_epoch(3);
  v1::PullResponse pulled;
  ASSERT_TRUE(service_->DoPull(pull, &pulled).ok());
  pull.set_epoch(2);  // stale: rejected, not counted
  EXPECT_FALSE(service_->DoPull(pull, &pulled).ok());

  std::vector<prometheus::MetricFamily> families = registry_.Collect();
  EXPECT_EQ(CounterValue(families, "ember_rows_pushed_total", {{"table", "item"}}), 3);
  EXPECT_EQ(CounterValue(families, "ember_rows_pulled_total", {{"table", "item"}}), 2);
  EXPECT_EQ(CounterValue(families, "ember_push_duplicates_total"), 1);
  EXPECT_EQ(GaugeValue(families, "ember_slot_map_epoch"), 3);

  service_->SetSlotMap(SlotMap::Even({0}, 4));
  families = registry_.Collect();
  EXPECT_EQ(GaugeValue(families, "ember_slot_map_epoch"), 4);
}

TEST_F(PsMetricsTest, UpdateStreamsAreCounted) {
  metrics_->WatchOpened();
  metrics_->WatchOpened();
  metrics_->CountWatchMessage(/*rows=*/10, /*bytes=*/500);
  metrics_->CountWatchMessage(/*rows=*/0, /*bytes=*/40);  // a progress mark
  metrics_->WatchClosed();
  const std::vector<prometheus::MetricFamily> families = registry_.Collect();
  EXPECT_EQ(GaugeValue(families, "ember_watch_streams"), 1);
  EXPECT_EQ(CounterValue(families, "ember_watch_messages_total"), 2);
  EXPECT_EQ(CounterValue(families, "ember_watch_rows_total"), 10);
  EXPECT_EQ(CounterValue(families, "ember_watch_sent_bytes_total"), 540);
}

TEST_F(PsMetricsTest, CollectorReadsStoreStats) {
  PsStoreCollector collector(store_.get(), /*rocksdb=*/nullptr);
  std::vector<prometheus::MetricFamily> families = collector.Collect();
  EXPECT_EQ(GaugeValue(families, "ember_memory_hit_ratio"), 0);  // no lookup yet
  EXPECT_EQ(GaugeValue(families, "ember_memory_budget_bytes"), 1 << 20);
  EXPECT_EQ(GaugeValue(families, "ember_memory_rows", {{"table", "item"}}), 0);

  v1::PushResponse pushed;
  ASSERT_TRUE(service_->DoPush(PushOf({1, 2, 3}, 1), &pushed).ok());
  families = collector.Collect();
  EXPECT_EQ(GaugeValue(families, "ember_store_version"), store_->version());
  EXPECT_GT(store_->version(), 0u);
  EXPECT_EQ(GaugeValue(families, "ember_memory_rows", {{"table", "item"}}), 3);
  EXPECT_GT(GaugeValue(families, "ember_memory_bytes").value_or(0), 0);
  EXPECT_EQ(CounterValue(families, "ember_admitted_rows_total"), store_->Stats().admitted);
  EXPECT_EQ(CounterValue(families, "ember_evicted_rows_total", {{"reason", "memory"}}), 0);
  const StoreStats stats = store_->Stats();
  const double lookups = static_cast<double>(stats.memory_hits + stats.memory_misses);
  if (lookups > 0) {
    EXPECT_DOUBLE_EQ(GaugeValue(families, "ember_memory_hit_ratio").value_or(-1),
                     static_cast<double>(stats.memory_hits) / lookups);
  }
  for (const prometheus::MetricFamily& f : families) {
    EXPECT_EQ(f.name.rfind("ember_rocksdb_", 0), std::string::npos) << f.name;
  }
}

}  // namespace
}  // namespace ember
