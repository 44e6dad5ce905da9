// Copyright 2026 The Ember Authors.
//
// The PS wire fields a test builds by hand (ps.proto): packed little-endian uint64 ids
// and float32 values, as a client written outside the project would send them.
//
//   v1::PushRequest r;
//   r.set_ids(PackIds({1, 2}));
//   r.set_grads(PackFloat32(grads));

#ifndef EMBER_TESTS_SUPPORT_PS_WIRE_H_
#define EMBER_TESTS_SUPPORT_PS_WIRE_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/float16.h"

namespace ember {

inline std::string PackIds(const std::vector<uint64_t>& ids) {
  return std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 8);
}

inline std::string PackFloat32(const std::vector<float>& values) {
  std::string out;
  AppendFloat32Bytes(values, &out);
  return out;
}

// PullResponse.values in float32, as floats.
inline std::vector<float> UnpackFloat32(const std::string& bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

}  // namespace ember

#endif  // EMBER_TESTS_SUPPORT_PS_WIRE_H_
