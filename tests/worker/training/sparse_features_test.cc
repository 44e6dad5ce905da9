// Copyright 2026 The Ember Authors.
//
// SparseBatch (unique IDs, pooling and its gradient) and the BSP sparse-gradient
// reduction between workers (ReduceSparseGradients over an in-process collective).

#include <map>
#include <random>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/training/sparse_exchange.h"
#include "worker/training/sparse_features.h"

namespace ember::worker {
namespace {

// Two tables; features: a (table 0, SUM), b (table 1, SUM), c (table 0, MEAN).
SparseLayout TestLayout() {
  v1::ModelConfig config;
  v1::TableConfig* t0 = config.add_tables();
  t0->set_name("item");
  t0->set_dim(3);
  v1::TableConfig* t1 = config.add_tables();
  t1->set_name("user");
  t1->set_dim(2);
  auto add = [&](const char* name, const char* table, bool mean) {
    v1::FeatureConfig* f = config.add_features();
    f->set_name(name);
    f->set_column(name);
    f->set_table(table);
    f->set_pooling(mean ? v1::FeatureConfig::MEAN : v1::FeatureConfig::SUM);
  };
  add("a", "item", false);
  add("b", "user", false);
  add("c", "item", true);
  return SparseLayout::FromConfig(config);
}

void AddExample(model::ExampleBatch* batch, std::vector<std::vector<uint64_t>> ids_per_feature) {
  for (size_t f = 0; f < ids_per_feature.size(); ++f) {
    model::SparseColumn& col = batch->sparse[f];
    col.ids.insert(col.ids.end(), ids_per_feature[f].begin(), ids_per_feature[f].end());
    col.offsets.push_back(static_cast<uint32_t>(col.ids.size()));
  }
  batch->size += 1;
}

// A deterministic "row" of an id.
float RowValue(uint64_t id, int j) { return static_cast<float>(id % 97) * 0.01f + j * 0.1f; }

void FillRows(SparseBatch& sparse) {
  for (int t = 0; t < sparse.num_tables(); ++t) {
    const int dim = sparse.layout().tables[t].dim;
    SparseBatch::TableData& table = sparse.table(t);
    for (size_t i = 0; i < table.ids.size(); ++i) {
      for (int j = 0; j < dim; ++j) table.rows[i * dim + j] = RowValue(table.ids[i], j);
    }
  }
}

TEST(SparseFeaturesTest, LayoutPlacesFeaturesSideBySide) {
  const SparseLayout layout = TestLayout();
  ASSERT_EQ(layout.features.size(), 3u);
  EXPECT_EQ(layout.pooled_width, 3 + 2 + 3);
  EXPECT_EQ(layout.features[1].pooled_offset, 3);
  EXPECT_EQ(layout.features[2].pooled_offset, 5);
  EXPECT_TRUE(layout.features[2].mean);
  EXPECT_THAT(layout.FeatureDims(), ::testing::ElementsAre(3, 2, 3));
}

TEST(SparseFeaturesTest, UniqueIdsAreSharedAcrossFeaturesOfATableInFirstSeenOrder) {
  SparseBatch sparse(TestLayout());
  model::ExampleBatch batch;
  batch.Reset(0, 3, 0);
  AddExample(&batch, {{7}, {1}, {9, 7}});
  AddExample(&batch, {{9}, {1}, {}});
  AddExample(&batch, {{5}, {2}, {5, 5, 8}});
  sparse.Build(batch);
  EXPECT_THAT(sparse.table(0).ids, ::testing::ElementsAre(7, 9, 5, 8));
  EXPECT_THAT(sparse.table(1).ids, ::testing::ElementsAre(1, 2));
  EXPECT_EQ(sparse.unique_ids(), 6u);
  EXPECT_EQ(sparse.table(0).rows.size(), 4u * 3);
}

TEST(SparseFeaturesTest, PoolSumsAndAveragesRows) {
  SparseBatch sparse(TestLayout());
  model::ExampleBatch batch;
  batch.Reset(0, 3, 0);
  AddExample(&batch, {{7}, {1}, {9, 7}});
  AddExample(&batch, {{}, {1}, {}});
  sparse.Build(batch);
  FillRows(sparse);
  std::vector<float> pooled(2 * 8);
  sparse.Pool(absl::MakeSpan(pooled));
  for (int j = 0; j < 3; ++j) {
    EXPECT_FLOAT_EQ(pooled[j], RowValue(7, j));
    EXPECT_FLOAT_EQ(pooled[5 + j], (RowValue(9, j) + RowValue(7, j)) / 2);
    EXPECT_EQ(pooled[8 + j], 0.0f);      // example 1 has no `a` ids
    EXPECT_EQ(pooled[8 + 5 + j], 0.0f);  // nor `c` ids: zeros, not NaN
  }
  for (int j = 0; j < 2; ++j) EXPECT_FLOAT_EQ(pooled[3 + j], RowValue(1, j));
}

TEST(SparseFeaturesTest, BackwardIsTheGradientOfPool) {
  // Loss = sum(pooled * w) for fixed random w: d loss / d row is exactly what
  // Backward must produce; check it against finite differences of Pool.
  SparseBatch sparse(TestLayout());
  model::ExampleBatch batch;
  batch.Reset(0, 3, 0);
  std::mt19937_64 rng(3);
  for (int b = 0; b < 20; ++b) {
    std::vector<std::vector<uint64_t>> ids(3);
    for (int f = 0; f < 3; ++f) {
      const int n = f == 2 ? static_cast<int>(rng() % 4) : 1;
      for (int k = 0; k < n; ++k) ids[f].push_back(rng() % 6);
    }
    AddExample(&batch, ids);
  }
  sparse.Build(batch);
  FillRows(sparse);
  const int width = sparse.layout().pooled_width;
  std::vector<float> w(20 * width);
  for (float& v : w) v = static_cast<float>(rng() % 1000) / 1000.0f - 0.5f;
  auto loss = [&] {
    std::vector<float> pooled(20 * width);
    sparse.Pool(absl::MakeSpan(pooled));
    double sum = 0;
    for (size_t i = 0; i < pooled.size(); ++i) sum += double{pooled[i]} * w[i];
    return sum;
  };
  sparse.Backward(w);
  for (int t = 0; t < sparse.num_tables(); ++t) {
    SparseBatch::TableData& table = sparse.table(t);
    for (size_t i = 0; i < table.rows.size(); ++i) {
      const float saved = table.rows[i];
      table.rows[i] = saved + 0.01f;
      const double up = loss();
      table.rows[i] = saved - 0.01f;
      const double down = loss();
      table.rows[i] = saved;
      EXPECT_NEAR(table.grads[i], (up - down) / 0.02, 1e-3) << "table " << t << " element " << i;
    }
  }
}

// An in-process collective for `world` threads: AllToAll through shared memory.
class SharedExchange {
 public:
  explicit SharedExchange(int world) : world_(world), slots_(world) {}
  std::vector<std::string> Exchange(int rank, const std::vector<std::string>& send) {
    absl::MutexLock lock(&mu_);
    slots_[rank] = send;
    Wait();
    std::vector<std::string> recv(world_);
    for (int r = 0; r < world_; ++r) recv[r] = slots_[r][rank];
    Wait();
    return recv;
  }

 private:
  // A cyclic barrier over mu_ (held).
  void Wait() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int generation = generation_;
    if (++arrived_ == world_) {
      arrived_ = 0;
      ++generation_;
      return;
    }
    auto passed = [this, generation]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return generation_ != generation; };
    mu_.Await(absl::Condition(&passed));
  }
  const int world_;
  absl::Mutex mu_;
  std::vector<std::vector<std::string>> slots_ ABSL_GUARDED_BY(mu_);
  int arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int generation_ ABSL_GUARDED_BY(mu_) = 0;
};

class InProcessCollective : public Collective {
 public:
  InProcessCollective(SharedExchange* exchange, int rank, int world)
      : exchange_(exchange), rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  absl::Status AllReduceSum(absl::Span<float>) override { return absl::UnimplementedError(""); }
  absl::Status Barrier() override { return absl::UnimplementedError(""); }
  absl::StatusOr<std::vector<std::string>> AllToAll(const std::vector<std::string>& send) override {
    return exchange_->Exchange(rank_, send);
  }

 private:
  SharedExchange* exchange_;
  int rank_, world_;
};

TEST(SparseExchangeTest, EveryIdIsPushedOnceByItsOwnerWithTheSumOverRanks) {
  constexpr int kWorld = 3;
  const SparseLayout layout = TestLayout();
  std::vector<std::unique_ptr<SparseBatch>> batches;
  std::map<std::pair<int, uint64_t>, std::vector<double>> expected;  // (table, id) -> sum
  for (int r = 0; r < kWorld; ++r) {
    batches.push_back(std::make_unique<SparseBatch>(layout));
    model::ExampleBatch batch;
    batch.Reset(0, 3, 0);
    std::mt19937_64 rng(r + 10);
    for (int b = 0; b < 30; ++b) {
      AddExample(&batch, {{rng() % 40}, {rng() % 10}, {rng() % 40, rng() % 40}});
    }
    batches[r]->Build(batch);
    for (int t = 0; t < 2; ++t) {
      SparseBatch::TableData& table = batches[r]->table(t);
      const int dim = layout.tables[t].dim;
      for (size_t i = 0; i < table.ids.size(); ++i) {
        auto& sum = expected[{t, table.ids[i]}];
        sum.resize(dim);
        for (int j = 0; j < dim; ++j) {
          table.grads[i * dim + j] = static_cast<float>(rng() % 1000) / 7.0f;
          sum[j] += table.grads[i * dim + j];
        }
      }
    }
  }
  SharedExchange exchange(kWorld);
  std::vector<std::vector<OwnedGradients>> out(kWorld);
  std::vector<absl::Status> status(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r) {
    threads.emplace_back([&, r] {
      InProcessCollective c(&exchange, r, kWorld);
      status[r] = ReduceSparseGradients(c, *batches[r], &out[r]);
    });
  }
  for (std::thread& t : threads) t.join();

  std::map<std::pair<int, uint64_t>, int> pushed_by;
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(status[r].ok()) << status[r];
    ASSERT_EQ(out[r].size(), 2u);
    for (int t = 0; t < 2; ++t) {
      const int dim = layout.tables[t].dim;
      for (size_t i = 0; i < out[r][t].ids.size(); ++i) {
        const uint64_t id = out[r][t].ids[i];
        EXPECT_EQ(OwnerRank(id, kWorld), r);
        EXPECT_TRUE(pushed_by.emplace(std::make_pair(t, id), r).second) << "pushed twice: " << id;
        for (int j = 0; j < dim; ++j) {
          const double want = expected[std::make_pair(t, id)][j];
          EXPECT_NEAR(out[r][t].grads[i * dim + j], want, 1e-2);
        }
      }
    }
  }
  EXPECT_EQ(pushed_by.size(), expected.size());  // and every id was pushed
}

TEST(SparseExchangeTest, OwnerRankSpreadsIds) {
  std::vector<int> count(4);
  for (uint64_t id = 0; id < 40000; ++id) count[OwnerRank(id, 4)]++;
  for (int c : count) EXPECT_NEAR(c, 10000, 500);
}

}  // namespace
}  // namespace ember::worker
