// Copyright 2026 The Ember Authors.

#include "common/slot_ranges.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/slot.h"

namespace ember {
namespace {

absl::StatusOr<uint32_t> ParseSlot(absl::string_view text, absl::string_view item) {
  uint32_t slot = 0;
  if (text.empty() ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(text, &slot)) {
    return absl::InvalidArgumentError(absl::StrCat("bad slot '", item, "': not a number"));
  }
  if (slot >= kNumSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad slot '", item, "': slots are 0-", kNumSlots - 1));
  }
  return slot;
}

template <typename Ranges>
std::string Format(const Ranges& ranges, size_t max_chars) {
  std::string out;
  int index = 0;
  const int total = static_cast<int>(ranges.size());
  for (const v1::SlotRange& r : ranges) {
    std::string item =
        r.first() == r.last() ? absl::StrCat(r.first()) : absl::StrCat(r.first(), "-", r.last());
    if (max_chars > 0 && index > 0 && out.size() + 1 + item.size() > max_chars) {
      absl::StrAppend(&out, ",... (+", total - index, " more)");
      return out;
    }
    if (index > 0) out += ',';
    out += item;
    ++index;
  }
  return out;
}

template <typename Ranges>
uint64_t Count(const Ranges& ranges) {
  uint64_t n = 0;
  for (const v1::SlotRange& r : ranges) n += r.last() >= r.first() ? r.last() - r.first() + 1 : 0;
  return n;
}

}  // namespace

absl::StatusOr<std::vector<uint32_t>> ParseSlotList(absl::string_view text) {
  if (text.empty()) return absl::InvalidArgumentError("empty slot list");
  std::vector<uint32_t> slots;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    if (item.empty()) return absl::InvalidArgumentError(absl::StrCat("empty item in '", text, "'"));
    const size_t dash = item.find('-');
    if (dash == absl::string_view::npos) {
      absl::StatusOr<uint32_t> slot = ParseSlot(item, item);
      if (!slot.ok()) return slot.status();
      slots.push_back(*slot);
      continue;
    }
    absl::StatusOr<uint32_t> first = ParseSlot(item.substr(0, dash), item);
    if (!first.ok()) return first.status();
    absl::StatusOr<uint32_t> last = ParseSlot(item.substr(dash + 1), item);
    if (!last.ok()) return last.status();
    if (*first > *last) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad slot range '", item, "': first is above last"));
    }
    for (uint32_t s = *first; s <= *last; ++s) slots.push_back(s);
  }
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  return slots;
}

std::vector<v1::SlotRange> ToRanges(const std::vector<uint32_t>& slots) {
  std::vector<v1::SlotRange> ranges;
  for (uint32_t s : slots) {
    if (!ranges.empty() && ranges.back().last() + 1 == s) {
      ranges.back().set_last(s);
    } else {
      v1::SlotRange r;
      r.set_first(s);
      r.set_last(s);
      ranges.push_back(r);
    }
  }
  return ranges;
}

uint64_t CountSlots(const google::protobuf::RepeatedPtrField<v1::SlotRange>& ranges) {
  return Count(ranges);
}
uint64_t CountSlots(const std::vector<v1::SlotRange>& ranges) { return Count(ranges); }

std::string FormatRanges(const std::vector<v1::SlotRange>& ranges, size_t max_chars) {
  return Format(ranges, max_chars);
}
std::string FormatRanges(const google::protobuf::RepeatedPtrField<v1::SlotRange>& ranges,
                         size_t max_chars) {
  return Format(ranges, max_chars);
}

absl::StatusOr<std::vector<uint32_t>> FromRanges(
    const google::protobuf::RepeatedPtrField<v1::SlotRange>& ranges) {
  std::vector<uint32_t> slots;
  for (const v1::SlotRange& r : ranges) {
    if (r.first() > r.last() || r.last() >= kNumSlots) {
      return absl::InvalidArgumentError(absl::StrCat("bad slot range ", r.first(), "-", r.last(),
                                                     ": want first <= last < ", kNumSlots));
    }
    for (uint32_t s = r.first(); s <= r.last(); ++s) slots.push_back(s);
  }
  std::sort(slots.begin(), slots.end());
  auto dup = std::adjacent_find(slots.begin(), slots.end());
  if (dup != slots.end()) {
    return absl::InvalidArgumentError(absl::StrCat("slot ", *dup, " is in two slot ranges"));
  }
  return slots;
}

}  // namespace ember
