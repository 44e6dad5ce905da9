// Copyright 2026 The Ember Authors.

#include "server/store/initializer.h"

#include <cmath>

#include "common/hash.h"

namespace ember {
namespace {

// Uniform in [0, 1) with 24 random bits: exactly representable as a float.
inline float UnitFloat(uint64_t bits) { return static_cast<float>(bits >> 40) * 0x1p-24f; }

}  // namespace

void InitEmbedding(const v1::InitializerConfig& init, uint64_t table_seed, uint64_t id, float* out,
                   uint32_t dim) {
  // Decorrelated from the slot hash (which uses Mix64(id ^ seed)).
  const uint64_t base = Mix64Alt(id ^ Mix64(table_seed ^ 0x5eedULL));
  const float scale = init.scale();
  switch (init.kind()) {
    case v1::InitializerConfig::ZEROS:
      for (uint32_t i = 0; i < dim; ++i) out[i] = 0.0f;
      return;
    case v1::InitializerConfig::NORMAL:
      // Box-Muller on pairs of counter-based uniforms.
      for (uint32_t i = 0; i < dim; i += 2) {
        const uint64_t r = Mix64(base + i);
        const float u1 = 1.0f - UnitFloat(r);  // (0, 1]
        const float u2 = UnitFloat(Mix64Alt(r));
        const float radius = std::sqrt(-2.0f * std::log(u1)) * scale;
        out[i] = radius * std::cos(6.28318530718f * u2);
        if (i + 1 < dim) out[i + 1] = radius * std::sin(6.28318530718f * u2);
      }
      return;
    case v1::InitializerConfig::UNIFORM:
    default:
      for (uint32_t i = 0; i < dim; ++i) {
        out[i] = (2.0f * UnitFloat(Mix64(base + i)) - 1.0f) * scale;
      }
      return;
  }
}

}  // namespace ember
