// Copyright 2026 The Ember Authors.

#include "common/model/tower_layout.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/model/layers.h"

namespace ember::model::dense_internal {
namespace {

// Larger layers are surely a config mistake, and this keeps every size product in range.
constexpr uint32_t kMaxWidth = 1 << 16;
// CROSS: the default and the most cross layers (as model_config.cc).
constexpr uint32_t kDefaultCrossLayers = 2;
constexpr uint32_t kMaxCrossLayers = 8;

// splitmix64 (Steele et al.): the init PRNG, the same stream on every platform.
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

absl::Status CheckWidth(uint32_t width, const char* field, int index) {
  if (width == 0 || width > kMaxWidth) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense tower: ", field, "[", index, "] is ", width, "; want 1..", kMaxWidth));
  }
  return absl::OkStatus();
}

}  // namespace

int TowerLayout::MaxWidth() const {
  int width = interaction_width;
  for (const Layer& layer : bottom) width = std::max(width, layer.out);
  for (const Layer& layer : cross) width = std::max(width, layer.out);
  for (const Layer& layer : top) width = std::max(width, layer.out);
  for (const TaskHead& task : tasks) {
    for (const Layer& layer : task.top) width = std::max(width, layer.out);
  }
  return width;
}

double TowerLayout::ForwardMacsPerExample() const {
  double macs = 0;
  for (const Layer& layer : bottom) macs += static_cast<double>(layer.in) * layer.out;
  for (const Layer& layer : cross) macs += static_cast<double>(layer.in) * layer.out;
  for (const Layer& layer : top) macs += static_cast<double>(layer.in) * layer.out;
  for (const TaskHead& task : tasks) {
    for (const Layer& layer : task.top) macs += static_cast<double>(layer.in) * layer.out;
  }
  if (interaction == v1::DenseTowerConfig::DOT) {
    const double n = static_cast<double>(feature_dims.size()) + (num_dense > 0 ? 1 : 0);
    macs += n * (n - 1) / 2 * DotDim();
  }
  return macs;
}

namespace {

// Appends a layer of in x out weights and out biases to `layers`, its parameters
// after the tower's so far.
void AddLayer(TowerLayout* t, std::vector<Layer>* layers, int in, int out, bool relu) {
  Layer layer{in, out, t->num_parameters, t->num_parameters + static_cast<size_t>(in) * out, relu};
  t->num_parameters = layer.b + out;
  layers->push_back(layer);
}

// The interaction's output width (t->interaction_width) from the bottom output and
// the features. INVALID_ARGUMENT when DOT's vectors differ in dim or are fewer than
// two, or CONCAT / CROSS has no input.
absl::Status SetInteractionWidth(TowerLayout* t) {
  const int num_features = static_cast<int>(t->feature_dims.size());
  if (t->interaction == v1::DenseTowerConfig::DOT) {
    const bool has_bottom = t->num_dense > 0;
    const int dim = has_bottom ? t->bottom_width : (num_features > 0 ? t->feature_dims[0] : 0);
    for (int i = 0; i < num_features; ++i) {
      if (t->feature_dims[i] != dim) {
        return absl::InvalidArgumentError(
            absl::StrCat("dense tower: DOT interaction needs every feature dim equal to ",
                         has_bottom ? "the bottom output size " : "the first feature's dim ", dim,
                         "; feature ", i, " has dim ", t->feature_dims[i]));
      }
    }
    if (num_features + (has_bottom ? 1 : 0) < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("dense tower: DOT interaction needs at least two vectors (bottom output and "
                       "features); have ",
                       num_features, " features and ", has_bottom ? "a" : "no", " bottom output"));
    }
    t->interaction_width = DotOutputWidth(has_bottom, num_features, dim);
  } else {
    t->interaction_width = t->bottom_width + t->pooled_width;
    if (t->interaction_width == 0) {
      return absl::InvalidArgumentError("dense tower: no inputs (no dense and no features)");
    }
  }
  return absl::OkStatus();
}

// The cross layers' products over the interaction width D (t->cross, cross_layers,
// cross_rank). INVALID_ARGUMENT for cross_layers above 8 or cross_rank not below D.
absl::Status AddCrossLayers(const v1::DenseTowerConfig& config, TowerLayout* t) {
  const uint32_t layers = config.cross_layers() == 0 ? kDefaultCrossLayers : config.cross_layers();
  if (layers > kMaxCrossLayers) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense tower: cross_layers is ", layers, "; want 1..", kMaxCrossLayers));
  }
  const int width = t->interaction_width;
  if (config.cross_rank() >= static_cast<uint32_t>(width)) {
    return absl::InvalidArgumentError(absl::StrCat("dense tower: cross_rank ", config.cross_rank(),
                                                   " is not below the cross width ", width,
                                                   " (0 = full rank)"));
  }
  t->cross_layers = static_cast<int>(layers);
  t->cross_rank = static_cast<int>(config.cross_rank());
  for (uint32_t l = 0; l < layers; ++l) {
    if (t->cross_rank == 0) {
      AddLayer(t, &t->cross, width, width, /*relu=*/false);
    } else {
      AddLayer(t, &t->cross, width, t->cross_rank, /*relu=*/false);  // V, c
      AddLayer(t, &t->cross, t->cross_rank, width, /*relu=*/false);  // U, b
    }
  }
  return absl::OkStatus();
}

// The extra tasks' top MLPs (t->tasks), each over the interaction output (or x_L)
// like the click task's; an empty task top_mlp means the tower's. INVALID_ARGUMENT for
// more than 4 tasks, an unknown kind, a loss weight outside (0, 100] or a bad size.
absl::Status AddTaskHeads(const v1::DenseTowerConfig& config, TowerLayout* t) {
  if (config.tasks_size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense tower: ", config.tasks_size(), " tasks; at most 4"));
  }
  for (int i = 0; i < config.tasks_size(); ++i) {
    const v1::TaskConfig& task = config.tasks(i);
    TowerLayout::TaskHead head;
    head.kind =
        task.kind() == v1::TaskConfig::KIND_UNSPECIFIED ? v1::TaskConfig::INDEPENDENT : task.kind();
    if (head.kind != v1::TaskConfig::INDEPENDENT && head.kind != v1::TaskConfig::ESMM_CTCVR) {
      return absl::InvalidArgumentError(
          absl::StrCat("dense tower: tasks[", i, "] has unknown kind ", task.kind()));
    }
    head.loss_weight = task.has_loss_weight() ? task.loss_weight() : 1.0f;
    if (!(head.loss_weight > 0 && head.loss_weight <= 100)) {
      return absl::InvalidArgumentError(absl::StrCat("dense tower: tasks[", i, "].loss_weight is ",
                                                     head.loss_weight, "; want (0, 100]"));
    }
    const auto& sizes = task.top_mlp().empty() ? config.top_mlp() : task.top_mlp();
    int width = t->interaction_width;
    for (int j = 0; j < sizes.size(); ++j) {
      if (absl::Status s = CheckWidth(sizes[j], "tasks.top_mlp", j); !s.ok()) return s;
      AddLayer(t, &head.top, width, static_cast<int>(sizes[j]), /*relu=*/true);
      width = static_cast<int>(sizes[j]);
    }
    AddLayer(t, &head.top, width, 1, /*relu=*/false);
    t->tasks.push_back(std::move(head));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TowerLayout> BuildTowerLayout(const v1::DenseTowerConfig& config, int num_dense,
                                             std::vector<int> feature_dims) {
  TowerLayout t;
  t.interaction = config.interaction();
  if (t.interaction == v1::DenseTowerConfig::INTERACTION_UNSPECIFIED) {
    t.interaction = v1::DenseTowerConfig::DOT;
  }
  if (t.interaction != v1::DenseTowerConfig::DOT && t.interaction != v1::DenseTowerConfig::CONCAT &&
      t.interaction != v1::DenseTowerConfig::CROSS) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense tower: unknown interaction ", static_cast<int>(t.interaction)));
  }
  if (t.interaction != v1::DenseTowerConfig::CROSS &&
      (config.cross_layers() != 0 || config.cross_rank() != 0)) {
    return absl::InvalidArgumentError(
        "dense tower: cross_layers / cross_rank are set but interaction is not CROSS");
  }
  if (num_dense < 0 || num_dense > static_cast<int>(kMaxWidth)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense tower: num_dense is ", num_dense, "; want 0..", kMaxWidth));
  }
  t.num_dense = num_dense;
  for (size_t i = 0; i < feature_dims.size(); ++i) {
    if (feature_dims[i] <= 0 || feature_dims[i] > static_cast<int>(kMaxWidth)) {
      return absl::InvalidArgumentError(absl::StrCat("dense tower: feature_dims[", i, "] is ",
                                                     feature_dims[i], "; want 1..", kMaxWidth));
    }
    t.pooled_width += feature_dims[i];
    if (t.pooled_width > static_cast<int>(kMaxWidth)) {
      return absl::InvalidArgumentError("dense tower: pooled features wider than 65536");
    }
  }
  t.feature_dims = std::move(feature_dims);
  for (int i = 0; i < config.bottom_mlp_size(); ++i) {
    if (absl::Status s = CheckWidth(config.bottom_mlp(i), "bottom_mlp", i); !s.ok()) return s;
  }
  for (int i = 0; i < config.top_mlp_size(); ++i) {
    if (absl::Status s = CheckWidth(config.top_mlp(i), "top_mlp", i); !s.ok()) return s;
  }

  // Bottom MLP: only with dense features (without them bottom_mlp is ignored).
  if (num_dense > 0) {
    t.bottom_width = num_dense;
    for (uint32_t width : config.bottom_mlp()) {
      AddLayer(&t, &t.bottom, t.bottom_width, static_cast<int>(width), /*relu=*/true);
      t.bottom_width = static_cast<int>(width);
    }
  }

  if (absl::Status s = SetInteractionWidth(&t); !s.ok()) return s;
  if (t.interaction == v1::DenseTowerConfig::CROSS) {
    if (absl::Status s = AddCrossLayers(config, &t); !s.ok()) return s;
  }

  int width = t.interaction_width;
  for (uint32_t out : config.top_mlp()) {
    AddLayer(&t, &t.top, width, static_cast<int>(out), /*relu=*/true);
    width = static_cast<int>(out);
  }
  AddLayer(&t, &t.top, width, 1, /*relu=*/false);
  if (absl::Status s = AddTaskHeads(config, &t); !s.ok()) return s;
  return t;
}

std::vector<float> InitialParameters(const TowerLayout& layout, uint64_t seed) {
  std::vector<float> parameters(layout.num_parameters, 0.0f);
  uint64_t state = seed;
  auto init = [&](const std::vector<Layer>& layers) {
    for (const Layer& layer : layers) {
      const double limit = std::sqrt(6.0 / (layer.in + layer.out));
      float* w = &parameters[layer.w];
      for (size_t i = 0; i < static_cast<size_t>(layer.in) * layer.out; ++i) {
        const double u = static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
        w[i] = static_cast<float>((2.0 * u - 1.0) * limit);
      }
    }
  };
  init(layout.bottom);
  init(layout.cross);
  init(layout.top);
  for (const TowerLayout::TaskHead& task : layout.tasks) init(task.top);
  return parameters;
}

}  // namespace ember::model::dense_internal
