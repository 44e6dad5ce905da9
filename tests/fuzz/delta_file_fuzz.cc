// Copyright 2026 The Ember Authors.
//
// Fuzz target: the delta checkpoint file reader (server/checkpoint/delta_file.h), fed
// whole files as a restore reads them from the checkpoint directory. The versions the
// reader expects are taken from the input's own header (bytes 12..27) when it has
// one, so inputs get past the header check to the records. Invariants: no crash; the
// answer is OK or DATA_LOSS (a corrupt file must never pass as another error or crash
// a restore); records arrive in strictly increasing (space, key) order with bounded
// views.

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "server/checkpoint/delta_file.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = (ProcessScratchDir("delta-fuzz") / "delta.bin").string();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  ember::DeltaHeader expected;
  if (size >= 28) {
    std::memcpy(&expected.base_version, data + 12, 8);
    std::memcpy(&expected.version, data + 20, 8);
  }
  std::string last_space;
  std::string last_key;
  bool first = true;
  const absl::Status status =
      ember::ReadDeltaFile(path, expected, [&](const ember::DeltaRecord& record) {
        FUZZ_CHECK(record.space.size() <= size && record.key.size() <= size &&
                   record.value.size() <= size);
        FUZZ_CHECK(!record.erase || record.value.empty());
        const int by_space = std::string_view(last_space).compare(record.space);
        FUZZ_CHECK(first || by_space < 0 || (by_space == 0 && last_key < record.key));
        first = false;
        last_space.assign(record.space);
        last_key.assign(record.key);
        return absl::OkStatus();
      });
  FUZZ_CHECK(status.ok() || absl::IsDataLoss(status));
  return 0;
}
