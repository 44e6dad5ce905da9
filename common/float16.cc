// Copyright 2026 The Ember Authors.

#include "common/float16.h"

#include <bit>
#include <cstring>

namespace ember {

static_assert(std::endian::native == std::endian::little,
              "the wire format is little-endian; add byte swaps for big-endian hosts");

// After F. Giesen's float_to_half_fast3_rtne: exact round-to-nearest-even using the
// FPU for subnormals and an integer rounding bias for normals.
uint16_t FloatToHalf(float value) {
  constexpr uint32_t kF32Infinity = 255u << 23;
  constexpr uint32_t kF16Overflow = (127u + 16) << 23;  // 65536.0f
  constexpr uint32_t kDenormMagic = ((127u - 15) + (23 - 10) + 1) << 23;
  uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  uint16_t out;
  if (bits >= kF16Overflow) {
    out = bits > kF32Infinity ? 0x7e00 : 0x7c00;  // NaN -> quiet NaN; else Inf
  } else if (bits < (113u << 23)) {
    // The result is subnormal or zero: adding the magic float aligns the 10 mantissa
    // bits at the bottom, and the FPU rounds to nearest even.
    float f = std::bit_cast<float>(bits) + std::bit_cast<float>(kDenormMagic);
    out = static_cast<uint16_t>(std::bit_cast<uint32_t>(f) - kDenormMagic);
  } else {
    const uint32_t mantissa_odd = (bits >> 13) & 1;
    bits += ((15u - 127u) << 23) + 0xfff;     // rebias the exponent, rounding part 1
    bits += mantissa_odd;                     // rounding part 2: ties to even
    out = static_cast<uint16_t>(bits >> 13);  // overflow lands on Inf (0x7c00)
  }
  return static_cast<uint16_t>(out | (sign >> 16));
}

float HalfToFloat(uint16_t half) {
  constexpr uint32_t kShiftedExponent = 0x7c00u << 13;
  constexpr uint32_t kMagic = 113u << 23;
  uint32_t bits = (half & 0x7fffu) << 13;
  const uint32_t exponent = bits & kShiftedExponent;
  bits += (127u - 15u) << 23;
  if (exponent == kShiftedExponent) {
    bits += (128u - 16u) << 23;  // Inf / NaN
  } else if (exponent == 0) {
    bits += 1u << 23;  // zero / subnormal: renormalize through the FPU
    bits = std::bit_cast<uint32_t>(std::bit_cast<float>(bits) - std::bit_cast<float>(kMagic));
  }
  bits |= static_cast<uint32_t>(half & 0x8000u) << 16;
  return std::bit_cast<float>(bits);
}

void AppendFloat32Bytes(absl::Span<const float> values, std::string* out) {
  out->append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

void AppendFloat16Bytes(absl::Span<const float> values, std::string* out) {
  const size_t start = out->size();
  out->resize(start + values.size() * 2);
  EncodeFloat16Bytes(values, out->data() + start);
}

void EncodeFloat16Bytes(absl::Span<const float> values, char* out) {
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = FloatToHalf(values[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

void DecodeFloat32Bytes(absl::string_view bytes, absl::Span<float> out) {
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
}

void DecodeFloat16Bytes(absl::string_view bytes, absl::Span<float> out) {
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    out[i] = HalfToFloat(h);
  }
}

}  // namespace ember
