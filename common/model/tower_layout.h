// Copyright 2026 The Ember Authors.
//
// TowerLayout: the shape of a dense tower, shared by the CPU and CUDA backends so
// both validate a config the same way, lay parameters out the same way and start from
// bitwise the same initial weights. Internal to worker/dense/.

#ifndef EMBER_COMMON_MODEL_TOWER_LAYOUT_H_
#define EMBER_COMMON_MODEL_TOWER_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ember/v1/model.pb.h"

namespace ember::model::dense_internal {

struct Layer {
  int in = 0;
  int out = 0;
  size_t w = 0;  // offset of W [out x in] in the flat buffers
  size_t b = 0;  // offset of b [out]
  bool relu = false;
};

struct TowerLayout {
  v1::DenseTowerConfig::Interaction interaction = v1::DenseTowerConfig::DOT;
  int num_dense = 0;
  std::vector<int> feature_dims;
  int pooled_width = 0;       // sum of feature_dims
  int bottom_width = 0;       // 0 without dense features
  int interaction_width = 0;  // the top MLP's input width
  std::vector<Layer> bottom;
  // CROSS: the matrix products of the cross layers over x (width interaction_width),
  // in order, none with a ReLU. Full rank (cross_rank 0): one Layer W [D x D] per
  // cross layer; low rank r: two, V [r x D] (with bias c) then U [D x r] (with bias b).
  // Empty for the other interactions.
  std::vector<Layer> cross;
  int cross_layers = 0;    // CROSS: the number of cross layers
  int cross_rank = 0;      // CROSS: 0 = full rank
  std::vector<Layer> top;  // the last one is the 1-unit logit layer
  // Multi-task heads (DenseTowerConfig.tasks): each extra task's top MLP over the same
  // input as `top`, the last layer its 1-unit logit layer; parameters after `top`'s, in
  // task order. Empty for a single-task tower.
  struct TaskHead {
    v1::TaskConfig::Kind kind = v1::TaskConfig::INDEPENDENT;
    float loss_weight = 1.0f;
    std::vector<Layer> top;
  };
  std::vector<TaskHead> tasks;
  size_t num_parameters = 0;

  // The row length of the DOT matrix Z: the bottom width, or with no bottom vector the
  // (common) feature dim.
  int DotDim() const { return num_dense > 0 ? bottom_width : feature_dims[0]; }
  // The widest activation (interaction output or any layer output).
  int MaxWidth() const;
  // Multiply-adds of one example's forward pass through the linear layers (cross
  // layers' products included) and the DOT interaction (backward costs twice that): the FLOP count
  // is 2 x this.
  double ForwardMacsPerExample() const;
};

// Validates the config and shapes (the errors documented at DenseTower::Create) and lays
// the parameters out: every layer's weights then bias, bottom MLP first, then the cross
// layers' products (CROSS), then the top MLP, then each extra task's top MLP (tasks).
absl::StatusOr<TowerLayout> BuildTowerLayout(const v1::DenseTowerConfig& config, int num_dense,
                                             std::vector<int> feature_dims);

// The initial flat parameters: Xavier-uniform weights from one splitmix64 stream over
// the flat buffer in order (bias entries draw nothing), biases 0. The same bits on
// every platform.
std::vector<float> InitialParameters(const TowerLayout& layout, uint64_t seed);

}  // namespace ember::model::dense_internal

#endif  // EMBER_COMMON_MODEL_TOWER_LAYOUT_H_
