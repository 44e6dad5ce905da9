// Copyright 2026 The Ember Authors.
//
// Output building blocks of emberctl: aligned text tables for people, a small JSON
// writer for scripts (one object per command, stable snake_case keys, numbers as
// numbers), a reflection-based protobuf -> JSON/text rendering, and unit formatting.
//
//   TextTable t({"SHARD", "SLOTS"});
//   t.AddRow({"0", "8192"});
//   std::cout << t.Render();          // "SHARD  SLOTS\n0      8192\n"
//
//   JsonWriter j;
//   j.BeginObject().Key("epoch").Uint(1).Key("shards").BeginArray().EndArray().EndObject();
//   std::cout << j.str() << "\n";     // {"epoch":1,"shards":[]}
//
// Thread-compatible value types.

#ifndef EMBER_TOOLS_EMBERCTL_OUTPUT_H_
#define EMBER_TOOLS_EMBERCTL_OUTPUT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace ember::ctl {

// Columns separated by two spaces, every cell left-aligned, no trailing spaces.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  // REQUIRES: cells.size() == header size.
  void AddRow(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  bool empty() const { return rows_.empty(); }
  // Header line plus one line per row, each ending in '\n'; `indent` spaces before each.
  std::string Render(int indent = 0) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Writes compact JSON. Commas and nesting are tracked; callers pair Begin/End and put
// a Key before every value inside an object. Doubles that are not finite become null.
class JsonWriter {
 public:
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(absl::string_view key);
  JsonWriter& String(absl::string_view value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Float(float value);  // shortest text that reads back as the same float
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // Writes `message` as an object: every field (zero values included) under its proto
  // name, enums as their names, 64-bit integers as numbers; bytes fields are skipped.
  JsonWriter& Proto(const google::protobuf::Message& message);

  const std::string& str() const { return out_; }

 private:
  void BeforeValue();
  void Quoted(absl::string_view value);  // the escaped string, nothing else
  void ProtoField(const google::protobuf::Message& message,
                  const google::protobuf::FieldDescriptor* field, int index);

  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

// Every scalar field of `message` as ("path.to.field", text) pairs in field order,
// zero values included (repeated fields as "a,b,c"; bytes as "<N bytes>").
std::vector<std::pair<std::string, std::string>> FlattenProto(
    const google::protobuf::Message& message);

// "512 B", "1.2 KiB", "3.4 MiB", "1.2 GiB", "2.0 TiB".
std::string HumanBytes(uint64_t bytes);
// Decimal megabytes as in migration progress: "14.2 MB".
std::string Megabytes(double bytes);
// Shortest round-trip text of a float or double ("0.05", "1e-08").
std::string FloatText(float value);
std::string DoubleText(double value);
// Fixed with `digits` decimals ("12.35").
std::string Fixed(double value, int digits);
// "2026-11-30T12:00:00.123Z" for a Unix time in microseconds (UTC).
std::string UtcMicros(int64_t unix_micros);
// The enum value's name lower-cased ("ADAGRAD" -> "adagrad").
std::string LowerName(absl::string_view name);

}  // namespace ember::ctl

#endif  // EMBER_TOOLS_EMBERCTL_OUTPUT_H_
