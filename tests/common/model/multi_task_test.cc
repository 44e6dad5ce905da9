// Copyright 2026 The Ember Authors.
//
// Tests of the multi-task heads of the CPU dense tower (DenseTowerConfig.tasks:
// tower_layout.cc AddTaskHeads, dense_tower.cc ForwardTasks / ScoreTasks /
// BackwardWithTaskLoss, loss.cc MultiTaskLoss / TaskProbability): gradient checks of
// whole towers with INDEPENDENT and ESMM_CTCVR heads, task 0 bitwise the single-task
// tower's, batch-invariant ScoreTasks, the loss formulas, and shape errors.

#include <cmath>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "common/model/dense_tower.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/model/gradient_check.h"

namespace ember::model {
namespace {

using test::CheckGradient;
using test::MustCreate;
using test::Random;
using ::testing::HasSubstr;
using v1::DenseTowerConfig;
using v1::TaskConfig;

DenseTowerConfig Config(DenseTowerConfig::Interaction interaction) {
  DenseTowerConfig config;
  config.set_interaction(interaction);
  config.add_bottom_mlp(6);
  config.add_bottom_mlp(4);
  config.add_top_mlp(8);
  config.set_init_seed(11);
  return config;
}

TaskConfig* AddTask(DenseTowerConfig* config, TaskConfig::Kind kind) {
  TaskConfig* task = config->add_tasks();
  task->set_name(kind == TaskConfig::ESMM_CTCVR ? "ctcvr" : "conversion");
  task->set_kind(kind);
  return task;
}

std::vector<float> Labels(size_t n, uint32_t seed) {
  std::vector<float> u = Random(n, seed);
  for (float& x : u) x = x > 0.2f ? 1.0f : 0.0f;
  return u;
}

std::vector<TaskHeadKind> Heads(const DenseTowerConfig& config) {
  std::vector<TaskHeadKind> heads;
  for (const TaskConfig& t : config.tasks()) {
    heads.push_back({t.kind(), t.has_loss_weight() ? t.loss_weight() : 1.0f});
  }
  return heads;
}

// Finite differences of the whole multi-task loss (weighted, scaled) against
// BackwardWithTaskLoss, for every parameter and every pooled input.
void CheckMultiTaskGradient(const DenseTowerConfig& config, int num_dense, std::vector<int> dims) {
  std::unique_ptr<DenseTower> tower = MustCreate(config, num_dense, dims);
  ASSERT_NE(tower, nullptr);
  const int batch = 5;
  const int tasks = tower->num_tasks();
  ASSERT_EQ(tasks, 1 + config.tasks_size());
  std::vector<float> dense = Random(batch * num_dense, 61, 2.0f);
  std::vector<float> pooled = Random(batch * tower->pooled_width(), 62);
  std::vector<float> labels = Labels(static_cast<size_t>(batch) * tasks, 63);
  std::vector<float> weights = {1.0f, 0.5f, 2.0f, 1.0f, 0.25f};
  const float scale = 0.7f;
  absl::Span<float> params = tower->parameters();
  std::vector<float> noise = Random(params.size(), 64, 0.05f);
  for (size_t i = 0; i < params.size(); ++i) params[i] += noise[i];
  const std::vector<TaskHeadKind> heads = Heads(config);

  std::vector<float> logits(static_cast<size_t>(batch) * tasks), scratch(logits.size());
  auto loss = [&] {
    tower->ForwardTasks(batch, dense, pooled, absl::MakeSpan(logits));
    return double{MultiTaskLoss(heads, logits, labels, weights, scale, absl::MakeSpan(scratch))};
  };
  loss();
  std::fill(tower->gradients().begin(), tower->gradients().end(), 123.0f);  // overwritten
  std::vector<float> d_pooled(pooled.size(), 123.0f);
  const float l =
      tower->BackwardWithTaskLoss(logits, labels, weights, scale, absl::MakeSpan(d_pooled));
  EXPECT_EQ(l, static_cast<float>(loss()));
  std::vector<float> gradients(tower->gradients().begin(), tower->gradients().end());

  int skipped = CheckGradient(loss, params.data(), params.size(), gradients.data());
  skipped += CheckGradient(loss, pooled.data(), pooled.size(), d_pooled.data());
  const size_t total = params.size() + pooled.size();
  EXPECT_LE(skipped, static_cast<int>(total / 20)) << "of " << total;
}

TEST(MultiTaskTowerTest, GradientCheckIndependentHead) {
  DenseTowerConfig config = Config(DenseTowerConfig::DOT);
  AddTask(&config, TaskConfig::INDEPENDENT)->set_loss_weight(0.5f);
  CheckMultiTaskGradient(config, 3, {4, 4});
}

TEST(MultiTaskTowerTest, GradientCheckEsmmHead) {
  DenseTowerConfig config = Config(DenseTowerConfig::DOT);
  TaskConfig* task = AddTask(&config, TaskConfig::ESMM_CTCVR);
  task->add_top_mlp(5);
  task->add_top_mlp(3);
  task->set_loss_weight(2.0f);
  CheckMultiTaskGradient(config, 3, {4, 4});
}

TEST(MultiTaskTowerTest, GradientCheckBothHeadsConcatAndCross) {
  for (DenseTowerConfig::Interaction interaction :
       {DenseTowerConfig::CONCAT, DenseTowerConfig::CROSS}) {
    SCOPED_TRACE(DenseTowerConfig::Interaction_Name(interaction));
    DenseTowerConfig config = Config(interaction);
    AddTask(&config, TaskConfig::ESMM_CTCVR);
    AddTask(&config, TaskConfig::INDEPENDENT)->set_name("other");
    CheckMultiTaskGradient(config, 2, {3, 2});
  }
}

// Task 0 of a multi-task tower is the single-task tower: the same leading parameters,
// bitwise the same click logits, scores and (through Backward) gradients; the heads'
// parameters follow, and Backward leaves their gradients 0.
TEST(MultiTaskTowerTest, TaskZeroIsTheSingleTaskTower) {
  const DenseTowerConfig single = Config(DenseTowerConfig::DOT);
  DenseTowerConfig multi = single;
  AddTask(&multi, TaskConfig::ESMM_CTCVR);
  std::unique_ptr<DenseTower> a = MustCreate(single, 3, {4, 4, 4});
  std::unique_ptr<DenseTower> b = MustCreate(multi, 3, {4, 4, 4});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->num_tasks(), 1);
  EXPECT_EQ(b->num_tasks(), 2);
  const size_t n = a->parameters().size();
  ASSERT_GT(b->parameters().size(), n);
  EXPECT_EQ(std::vector<float>(b->parameters().begin(), b->parameters().begin() + n),
            std::vector<float>(a->parameters().begin(), a->parameters().end()));

  const int batch = 7;
  std::vector<float> dense = Random(batch * 3, 71, 2.0f);
  std::vector<float> pooled = Random(batch * a->pooled_width(), 72);
  std::vector<float> la(batch), lb(batch), lt(2 * batch);
  a->Forward(batch, dense, pooled, absl::MakeSpan(la));
  b->Forward(batch, dense, pooled, absl::MakeSpan(lb));
  EXPECT_EQ(la, lb);
  b->ForwardTasks(batch, dense, pooled, absl::MakeSpan(lt));
  EXPECT_EQ(std::vector<float>(lt.begin(), lt.begin() + batch), la);

  std::vector<float> c = Random(batch, 73);
  std::vector<float> da(pooled.size()), db(pooled.size());
  a->Backward(c, absl::MakeSpan(da));
  b->Forward(batch, dense, pooled, absl::MakeSpan(lb));
  std::fill(b->gradients().begin(), b->gradients().end(), 9.0f);
  b->Backward(c, absl::MakeSpan(db));
  EXPECT_EQ(da, db);
  EXPECT_EQ(std::vector<float>(b->gradients().begin(), b->gradients().begin() + n),
            std::vector<float>(a->gradients().begin(), a->gradients().end()));
  for (size_t i = n; i < b->gradients().size(); ++i) ASSERT_EQ(b->gradients()[i], 0.0f) << i;

  // Scores: task 0 is Score's, and any batching gives the same bits.
  std::vector<float> sa(batch), st(2 * batch), st1(2);
  a->Score(batch, dense, pooled, absl::MakeSpan(sa));
  b->ScoreTasks(batch, dense, pooled, absl::MakeSpan(st));
  EXPECT_EQ(std::vector<float>(st.begin(), st.begin() + batch), sa);
  for (int r = 0; r < batch; ++r) {
    b->ScoreTasks(1, absl::MakeSpan(dense).subspan(r * 3, 3),
                  absl::MakeSpan(pooled).subspan(r * b->pooled_width(), b->pooled_width()),
                  absl::MakeSpan(st1));
    EXPECT_EQ(st1[0], st[r]);
    EXPECT_EQ(st1[1], st[batch + r]);
  }
}

// With no heads MultiTaskLoss is BceWithLogits; the ESMM head's loss is the BCE of
// p_ctr * p_cvr, and TaskProbability gives that product.
TEST(MultiTaskLossTest, Formulas) {
  const std::vector<float> logits = {0.3f, -1.2f, 2.5f, -0.4f};
  const std::vector<float> labels = {1, 0, 1, 0};
  std::vector<float> d1(4), d2(4);
  EXPECT_EQ(MultiTaskLoss({}, logits, labels, {}, 0.5f, absl::MakeSpan(d1)),
            BceWithLogits(logits, labels, {}, 0.5f, absl::MakeSpan(d2)));
  EXPECT_EQ(d1, d2);

  const std::vector<float> two = {0.3f, -1.2f, 1.5f, 0.7f};  // click logits, cvr logits
  const std::vector<float> y = {1, 0, 1, 0};                 // clicks, conversions
  std::vector<float> d(4);
  const TaskHeadKind esmm{TaskConfig::ESMM_CTCVR, 1.0f};
  const float loss = MultiTaskLoss({&esmm, 1}, two, y, {}, 1.0f, absl::MakeSpan(d));
  auto sigmoid = [](double x) { return 1 / (1 + std::exp(-x)); };
  const double p0 = sigmoid(0.3) * sigmoid(1.5), p1 = sigmoid(-1.2) * sigmoid(0.7);
  const double want =
      -std::log(sigmoid(0.3)) - std::log(1 - sigmoid(-1.2)) - std::log(p0) - std::log(1 - p1);
  EXPECT_NEAR(loss, want, 1e-5);
  EXPECT_FLOAT_EQ(TaskProbability(TaskConfig::ESMM_CTCVR, 0.3f, 1.5f),
                  ClickProbability(0.3f) * ClickProbability(1.5f));
  EXPECT_EQ(TaskProbability(TaskConfig::INDEPENDENT, 0.3f, 1.5f), ClickProbability(1.5f));
  // Saturated logits: finite loss and gradients.
  const std::vector<float> big = {40.0f, 40.0f};
  const std::vector<float> zero = {0.0f, 0.0f};
  std::vector<float> db(2);
  const float l = MultiTaskLoss({&esmm, 1}, big, zero, {}, 1.0f, absl::MakeSpan(db));
  EXPECT_TRUE(std::isfinite(l));
  EXPECT_TRUE(std::isfinite(db[0]) && std::isfinite(db[1]));
}

TEST(MultiTaskTowerTest, ShapeErrors) {
  DenseTowerConfig config = Config(DenseTowerConfig::DOT);
  AddTask(&config, TaskConfig::INDEPENDENT)->add_top_mlp(0);
  absl::Status s = DenseTower::Create(config, 3, {4, 4}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tasks.top_mlp[0] is 0"));

  config = Config(DenseTowerConfig::DOT);
  AddTask(&config, TaskConfig::INDEPENDENT)->set_loss_weight(-1.0f);
  s = DenseTower::Create(config, 3, {4, 4}).status();
  EXPECT_THAT(s.message(), HasSubstr("tasks[0].loss_weight is -1"));

  config = Config(DenseTowerConfig::DOT);
  for (int i = 0; i < 5; ++i) AddTask(&config, TaskConfig::INDEPENDENT);
  s = DenseTower::Create(config, 3, {4, 4}).status();
  EXPECT_THAT(s.message(), HasSubstr("5 tasks; at most 4"));
}

}  // namespace
}  // namespace ember::model
