// Copyright 2026 The Ember Authors.
//
// Slot ranges (ps.proto SlotRange): slot lists as operators type them
// ("0-99,200,300-310"), as the coordinator validates them and as emberctl prints them.
//
//   EMBER_ASSIGN_OR_RETURN(std::vector<uint32_t> slots, ParseSlotList("0-99,200"));
//   std::vector<v1::SlotRange> ranges = ToRanges(slots);
//   std::string text = FormatRanges(ranges);  // "0-99,200"

#ifndef EMBER_COMMON_SLOT_RANGES_H_
#define EMBER_COMMON_SLOT_RANGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ember/v1/ps.pb.h"
#include "google/protobuf/repeated_ptr_field.h"

namespace ember {

// The slots of a comma-separated list of "N" and "A-B" (inclusive), ascending and
// without duplicates. INVALID_ARGUMENT naming the bad item for an empty list or item,
// a bad number, A > B, or a slot >= kNumSlots.
absl::StatusOr<std::vector<uint32_t>> ParseSlotList(absl::string_view text);

// Maximal runs of consecutive slots. REQUIRES: `slots` ascending without duplicates.
std::vector<v1::SlotRange> ToRanges(const std::vector<uint32_t>& slots);

// The slots in `ranges`, ascending. INVALID_ARGUMENT when a range has first > last or
// last >= kNumSlots, or when two ranges overlap.
absl::StatusOr<std::vector<uint32_t>> FromRanges(
    const google::protobuf::RepeatedPtrField<v1::SlotRange>& ranges);

// Slots in `ranges` (each first <= last).
uint64_t CountSlots(const google::protobuf::RepeatedPtrField<v1::SlotRange>& ranges);
uint64_t CountSlots(const std::vector<v1::SlotRange>& ranges);

// "0-4095,8192-9000,9100". With max_chars > 0 and a longer text: the ranges that fit,
// then ",... (+N more)".
std::string FormatRanges(const std::vector<v1::SlotRange>& ranges, size_t max_chars = 0);
std::string FormatRanges(const google::protobuf::RepeatedPtrField<v1::SlotRange>& ranges,
                         size_t max_chars = 0);

}  // namespace ember

#endif  // EMBER_COMMON_SLOT_RANGES_H_
