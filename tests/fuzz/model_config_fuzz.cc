// Copyright 2026 The Ember Authors.
//
// Fuzz target: the model config parser (common/model/model_config.h). The first byte picks
// text format or JSON; the rest is the config. Invariants: no crash; a config that
// parses is normalized, so normalizing it again changes nothing, and its text form
// parses back to the same config.

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/model/model_config.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool json = (data[0] & 1) != 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  absl::StatusOr<ember::v1::ModelConfig> config =
      ember::model::ParseModelConfig(text, json, /*base_dir=*/"", "fuzz");
  if (!config.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(config.status()));
    return 0;
  }
  absl::StatusOr<ember::v1::ModelConfig> again =
      ember::model::NormalizeModelConfig(*config, "fuzz");
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(*config, *again));
  std::string printed;
  FUZZ_CHECK(google::protobuf::TextFormat::PrintToString(*config, &printed));
  absl::StatusOr<ember::v1::ModelConfig> reparsed =
      ember::model::ParseModelConfig(printed, /*json=*/false, "", "fuzz-reprint");
  FUZZ_CHECK(reparsed.ok());
  FUZZ_CHECK(google::protobuf::util::MessageDifferencer::Equals(*config, *reparsed));
  return 0;
}
