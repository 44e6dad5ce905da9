// Copyright 2026 The Ember Authors.
//
// Finite gradients whose update would overflow a row or its optimizer state (issue 28
// item 1.2): under every optimizer the push is refused whole, before anything is
// written, and a normal push after it still applies. Rows are read back whole
// (embedding, optimizer state, meta) from the memory tier and, after an eviction, from
// the backend.

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/store/embedding_store.h"
#include "server/store/in_memory_backend.h"

namespace ember {
namespace {

constexpr uint32_t kDim = 4;
constexpr float kHuge = 3e38f;  // finite, but its square is not

struct Kind {
  const char* name;
  v1::OptimizerConfig::Kind kind;
  float learning_rate;
};

class FiniteUpdateTest : public testing::TestWithParam<Kind> {
 protected:
  void SetUp() override { Open(StoreOptions{}); }

  // A store with rows 1 and 2 stored (a normal push); 3 never pushed.
  void Open(const StoreOptions& options) {
    store_ = EmbeddingStore::Open(options, std::make_unique<InMemoryBackend>()).value();
    v1::TableConfig t;
    t.set_name("t");
    t.set_dim(kDim);
    t.mutable_optimizer()->set_kind(GetParam().kind);
    t.mutable_optimizer()->set_learning_rate(GetParam().learning_rate);
    ASSERT_TRUE(store_->CreateTable(t).ok());
    ASSERT_TRUE(store_->Push("t", {1, 2}, Grads(2, 0.5f), 1).ok());
  }

  static std::vector<float> Grads(size_t rows, float value) {
    return std::vector<float>(rows * kDim, value);
  }

  // Every byte a push could change: each row whole, the version and the change log.
  std::string State() {
    std::string out;
    for (uint64_t id : {1, 2, 3}) {
      absl::StatusOr<RowSnapshot> row = store_->ReadRow("t", id);
      EXPECT_TRUE(row.ok()) << row.status();
      if (!row.ok()) continue;
      for (float f : row->embedding) EXPECT_TRUE(std::isfinite(f)) << "id " << id;
      for (float f : row->state) EXPECT_TRUE(std::isfinite(f)) << "id " << id;
      out.append(reinterpret_cast<const char*>(&row->meta), sizeof(row->meta));
      out.append(reinterpret_cast<const char*>(row->embedding.data()),
                 row->embedding.size() * sizeof(float));
      out.append(reinterpret_cast<const char*>(row->state.data()),
                 row->state.size() * sizeof(float));
      out.push_back(row->stored ? 's' : '-');
    }
    out.append(std::to_string(store_->version()));
    return out;
  }

  // Pushes `grads` (huge somewhere) for ids {2, 1, 3} over and over: each must be
  // refused with the state unchanged. Several times, because under SGD one huge
  // gradient fits in a float and only the second overflows, were it applied.
  void ExpectRefused(const std::vector<float>& grads) {
    for (int attempt = 0; attempt < 3; ++attempt) {
      SCOPED_TRACE(attempt);
      const std::string before = State();
      const absl::Status s = store_->Push("t", {2, 1, 3}, grads, 2);
      if (attempt == 0 && GetParam().kind == v1::OptimizerConfig::SGD && s.ok()) {
        // SGD: w - lr * 3e38 is finite for a row near 0; the next one is not.
        continue;
      }
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "non-finite")) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "table 't'")) << s;
      EXPECT_EQ(State(), before) << "a refused push changed the store";
    }
  }

  std::unique_ptr<EmbeddingStore> store_;
};

TEST_P(FiniteUpdateTest, AnOverflowingPushIsRefusedWholeAndANormalOneStillApplies) {
  std::vector<float> grads = Grads(3, 0.25f);
  grads[kDim + 2] = kHuge;  // id 1, a stored row, in the middle of the batch
  ExpectRefused(grads);
  std::vector<float> negative = Grads(3, 0.25f);
  negative[1] = -kHuge;  // id 2
  ExpectRefused(negative);

  const std::string before = State();
  const uint64_t version = store_->version();
  ASSERT_TRUE(store_->Push("t", {2, 1, 3}, Grads(3, 0.25f), 3).ok());
  EXPECT_EQ(store_->version(), version + 3);
  EXPECT_NE(State(), before);
  EXPECT_EQ(store_->Stats().not_finite_updates, 0u);
}

TEST_P(FiniteUpdateTest, TheCheckCoversRowsReadFromTheBackendAndNewRows) {
  // A 1-byte budget: every push writes its rows back and drops them from memory, so
  // the check reads rows 1 and 2 from the backend; id 9 has no row at all (its init
  // row is checked).
  Open(StoreOptions{.memory_budget_bytes = 1, .num_stripes = 1});
  ASSERT_EQ(store_->Stats().rows_in_memory, 0);
  std::vector<float> grads = Grads(3, 0.25f);
  grads[3] = -kHuge;
  ExpectRefused(grads);
  std::string before = State();
  int refused = 0;
  for (int i = 0; i < 2; ++i) {
    const absl::Status s = store_->Push("t", {9}, Grads(1, kHuge), 4);
    if (s.ok()) {  // SGD: the first one fits
      before = State();
      continue;
    }
    ++refused;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(State(), before);
  }
  EXPECT_EQ(refused, GetParam().kind == v1::OptimizerConfig::SGD ? 1 : 2);
  absl::StatusOr<RowSnapshot> row = store_->ReadRow("t", 9);
  ASSERT_TRUE(row.ok()) << row.status();
  for (float f : row->embedding) EXPECT_TRUE(std::isfinite(f));
  for (float f : row->state) EXPECT_TRUE(std::isfinite(f));
}

// Below 2^40 a push is not checked up front (embedding_table.cc, kLargeGradient): an
// update can overflow only a row already near the float limit. Such a row keeps its
// floats, the rest of the push applies, and the store counts it.
TEST(FiniteUpdateFastPathTest, AnOverflowingRowKeepsItsFloatsAndIsCounted) {
  auto store = EmbeddingStore::Open(StoreOptions{}, std::make_unique<InMemoryBackend>()).value();
  v1::TableConfig t;
  t.set_name("t");
  t.set_dim(kDim);
  t.mutable_optimizer()->set_kind(v1::OptimizerConfig::SGD);
  t.mutable_optimizer()->set_learning_rate(1e26f);
  ASSERT_TRUE(store->CreateTable(t).ok());
  // Row 1 near the limit: 1e26 * -3e12 = -3e38 from about 0 (a finite update).
  ASSERT_TRUE(store->Push("t", {1}, std::vector<float>(kDim, -3e12f), 1).ok());
  const RowSnapshot near = store->ReadRow("t", 1).value();
  for (float f : near.embedding) ASSERT_TRUE(std::isfinite(f) && f > 1e38f) << f;
  // 1e12 < 2^40: not checked up front; row 1 would overflow, row 2 would not.
  std::vector<float> grads(2 * kDim, -1e12f);
  ASSERT_TRUE(store->Push("t", {1, 2}, grads, 2).ok());
  const RowSnapshot kept = store->ReadRow("t", 1).value();
  EXPECT_EQ(kept.embedding, near.embedding);
  EXPECT_GT(kept.meta.version, near.meta.version);  // its meta moved on
  const RowSnapshot applied = store->ReadRow("t", 2).value();
  for (float f : applied.embedding) EXPECT_TRUE(std::isfinite(f) && f > 1e37f) << f;
  EXPECT_EQ(store->Stats().not_finite_updates, 1u);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, FiniteUpdateTest,
                         testing::Values(Kind{"Sgd", v1::OptimizerConfig::SGD, 1.0f},
                                         Kind{"Adagrad", v1::OptimizerConfig::ADAGRAD, 0.1f},
                                         Kind{"Adam", v1::OptimizerConfig::ADAM, 0.01f},
                                         Kind{"Ftrl", v1::OptimizerConfig::FTRL, 0.1f}),
                         [](const testing::TestParamInfo<Kind>& info) { return info.param.name; });

}  // namespace
}  // namespace ember
