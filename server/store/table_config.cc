// Copyright 2026 The Ember Authors.

#include "server/store/table_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/clip.h"
#include "common/hash.h"
#include "common/status_macros.h"

namespace ember {
namespace {

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return name.rfind("__", 0) != 0;  // "__" prefix is reserved for Ember's own keyspaces
}

absl::Status CheckNonNegative(float v, absl::string_view field) {
  if (!std::isfinite(v) || v < 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be finite and >= 0; got ", v));
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t DefaultTableSeed(absl::string_view name) {
  // FNV-1a, then mixed: stable across processes and releases.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return Mix64(h);
}

float DefaultLearningRate(v1::OptimizerConfig::Kind kind) {
  switch (kind) {
    case v1::OptimizerConfig::ADAGRAD:
      return 0.1f;
    case v1::OptimizerConfig::ADAM:
      return 0.01f;
    case v1::OptimizerConfig::SGD:
      return 3.0f;
    case v1::OptimizerConfig::FTRL:
      return 0.1f;
    default:
      return 0.1f;
  }
}

uint32_t OptimizerStateFloats(const v1::OptimizerConfig& optimizer, uint32_t dim) {
  switch (optimizer.kind()) {
    case v1::OptimizerConfig::ADAGRAD:
      return dim;
    case v1::OptimizerConfig::ADAM:
      return 2 * dim + 2;  // m, v, beta1^t, beta2^t
    case v1::OptimizerConfig::FTRL:
      return 2 * dim;  // z, n
    default:
      return 0;
  }
}

namespace {

// Defaults the initializer's kind and scale and checks them.
absl::Status NormalizeInitializer(v1::InitializerConfig* init) {
  if (init->kind() == v1::InitializerConfig::KIND_UNSPECIFIED) {
    init->set_kind(v1::InitializerConfig::UNIFORM);
  }
  if (!v1::InitializerConfig::Kind_IsValid(init->kind())) {
    return absl::InvalidArgumentError("initializer.kind is not a known kind");
  }
  if (auto s = CheckNonNegative(init->scale(), "initializer.scale"); !s.ok()) return s;
  if (init->scale() == 0) {
    if (init->kind() == v1::InitializerConfig::UNIFORM) {
      init->set_scale(kDefaultUniformScale);
    } else if (init->kind() == v1::InitializerConfig::NORMAL) {
      init->set_scale(0.01f);
    }
  }
  return absl::OkStatus();
}

// Defaults the optimizer's kind and hyperparameters and checks them.
absl::Status NormalizeOptimizer(v1::OptimizerConfig* opt) {
  if (opt->kind() == v1::OptimizerConfig::KIND_UNSPECIFIED) {
    opt->set_kind(v1::OptimizerConfig::ADAGRAD);
  }
  if (!v1::OptimizerConfig::Kind_IsValid(opt->kind())) {
    return absl::InvalidArgumentError("optimizer.kind is not a known kind");
  }
  for (auto [v, name] : {std::pair{opt->learning_rate(), "optimizer.learning_rate"},
                         {opt->epsilon(), "optimizer.epsilon"},
                         {opt->beta1(), "optimizer.beta1"},
                         {opt->beta2(), "optimizer.beta2"},
                         {opt->ftrl_l1(), "optimizer.ftrl_l1"},
                         {opt->ftrl_l2(), "optimizer.ftrl_l2"},
                         {opt->ftrl_beta(), "optimizer.ftrl_beta"},
                         {opt->freq_power(), "optimizer.freq_power"},
                         {opt->freq_reference_count(), "optimizer.freq_reference_count"},
                         {opt->freq_min_scale(), "optimizer.freq_min_scale"},
                         {opt->freq_max_scale(), "optimizer.freq_max_scale"}}) {
    if (auto s = CheckNonNegative(v, name); !s.ok()) return s;
  }
  if (opt->has_initial_accumulator()) {
    if (auto s = CheckNonNegative(opt->initial_accumulator(), "optimizer.initial_accumulator");
        !s.ok()) {
      return s;
    }
  } else {
    opt->set_initial_accumulator(kDefaultInitialAccumulator);
  }
  if (opt->learning_rate() == 0) opt->set_learning_rate(DefaultLearningRate(opt->kind()));
  if (opt->epsilon() == 0) opt->set_epsilon(1e-8f);
  if (opt->beta1() == 0) opt->set_beta1(0.9f);
  if (opt->beta2() == 0) opt->set_beta2(0.999f);
  if (opt->ftrl_beta() == 0) opt->set_ftrl_beta(1.0f);
  if (opt->freq_reference_count() == 0) opt->set_freq_reference_count(100.0f);
  if (opt->freq_min_scale() == 0) opt->set_freq_min_scale(1.0f);
  if (opt->freq_max_scale() == 0) opt->set_freq_max_scale(4.0f);
  if (opt->beta1() >= 1 || opt->beta2() >= 1) {
    return absl::InvalidArgumentError("optimizer.beta1 and beta2 must be < 1");
  }
  if (opt->freq_min_scale() > opt->freq_max_scale()) {
    return absl::InvalidArgumentError("optimizer.freq_min_scale must be <= freq_max_scale");
  }
  return absl::OkStatus();
}

// Defaults the admission sketch's size and checks it.
absl::Status NormalizeAdmission(v1::AdmissionConfig* adm) {
  if (adm->sketch_width() == 0) adm->set_sketch_width(1u << 20);
  if (adm->sketch_depth() == 0) adm->set_sketch_depth(4);
  if (adm->sketch_width() > (1u << 28) || adm->sketch_width() < 64 ||
      (adm->sketch_width() & (adm->sketch_width() - 1)) != 0 || adm->sketch_depth() > 16) {
    return absl::InvalidArgumentError(
        "admission.sketch_width must be a power of two in [64, 2^28] and sketch_depth <= 16");
  }
  return absl::OkStatus();
}

// Defaults the eviction policy's count decay and checks the policy.
absl::Status NormalizeEviction(v1::EvictionConfig* ev) {
  if (auto s = CheckNonNegative(ev->min_count(), "eviction.min_count"); !s.ok()) return s;
  if (ev->count_decay() == 0) ev->set_count_decay(1.0f);
  if (!(ev->count_decay() > 0 && ev->count_decay() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("eviction.count_decay must be in (0, 1]; got ", ev->count_decay()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::TableConfig> NormalizeTableConfig(const v1::TableConfig& in) {
  v1::TableConfig c = in;
  if (!ValidName(c.name())) {
    return absl::InvalidArgumentError(
        absl::StrCat("table name '", ClipForMessage(c.name()),
                     "' must be 1-64 characters of [a-zA-Z0-9_.-], not starting "
                     "with '__'"));
  }
  if (c.dim() < 1 || c.dim() > kMaxDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", c.name(), "': dim must be in [1, ", kMaxDim, "]; got ", c.dim()));
  }
  if (c.seed() == 0) c.set_seed(DefaultTableSeed(c.name()));
  EMBER_RETURN_IF_ERROR(NormalizeInitializer(c.mutable_initializer()));
  EMBER_RETURN_IF_ERROR(NormalizeOptimizer(c.mutable_optimizer()));
  EMBER_RETURN_IF_ERROR(NormalizeAdmission(c.mutable_admission()));
  EMBER_RETURN_IF_ERROR(NormalizeEviction(c.mutable_eviction()));
  if (!v1::TableConfig::WireType_IsValid(c.wire_type())) {
    return absl::InvalidArgumentError("wire_type is not a known type");
  }
  return c;
}

bool SameStoredLayout(const v1::TableConfig& a, const v1::TableConfig& b) {
  return a.name() == b.name() && a.dim() == b.dim() && a.seed() == b.seed() &&
         a.optimizer().kind() == b.optimizer().kind() &&
         a.initializer().kind() == b.initializer().kind() &&
         a.initializer().scale() == b.initializer().scale();
}

}  // namespace ember
