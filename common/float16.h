// Copyright 2026 The Ember Authors.
//
// IEEE 754 binary16 ("half") conversion for the wire encoding of pulls and pushes.
// Float -> half rounds to nearest, ties to even; values beyond the half range become
// +-Inf; NaN stays NaN (quiet). Half -> float is exact. Pure functions, thread-safe.
//
//   uint16_t h = ember::FloatToHalf(0.1f);
//   float f = ember::HalfToFloat(h);  // 0.0999755859375f

#ifndef EMBER_COMMON_FLOAT16_H_
#define EMBER_COMMON_FLOAT16_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace ember {

uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t half);

// Appends values as packed little-endian float32 or float16 bytes to `out`.
void AppendFloat32Bytes(absl::Span<const float> values, std::string* out);
void AppendFloat16Bytes(absl::Span<const float> values, std::string* out);
// Writes values as packed little-endian float16 to out[0, 2 * values.size()).
void EncodeFloat16Bytes(absl::Span<const float> values, char* out);

// Decodes packed little-endian bytes into out. REQUIRES: bytes.size() == out.size() * 4
// (float32) or out.size() * 2 (float16).
void DecodeFloat32Bytes(absl::string_view bytes, absl::Span<float> out);
void DecodeFloat16Bytes(absl::string_view bytes, absl::Span<float> out);

}  // namespace ember

#endif  // EMBER_COMMON_FLOAT16_H_
