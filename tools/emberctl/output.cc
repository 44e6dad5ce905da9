// Copyright 2026 The Ember Authors.

#include "tools/emberctl/output.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "google/protobuf/descriptor.h"

namespace ember::ctl {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

template <typename T>
std::string ShortestText(T value) {
  if (!std::isfinite(value)) return std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  return ec == std::errc() ? std::string(buf, end) : absl::StrCat(value);
}

// Text of one scalar value of `field` (index -1: singular).
std::string ScalarText(const Message& m, const FieldDescriptor* f, int i) {
  const Reflection* r = m.GetReflection();
  const bool rep = i >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(rep ? r->GetRepeatedInt32(m, f, i) : r->GetInt32(m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(rep ? r->GetRepeatedInt64(m, f, i) : r->GetInt64(m, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return absl::StrCat(rep ? r->GetRepeatedUInt32(m, f, i) : r->GetUInt32(m, f));
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(rep ? r->GetRepeatedUInt64(m, f, i) : r->GetUInt64(m, f));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return FloatText(rep ? r->GetRepeatedFloat(m, f, i) : r->GetFloat(m, f));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return DoubleText(rep ? r->GetRepeatedDouble(m, f, i) : r->GetDouble(m, f));
    case FieldDescriptor::CPPTYPE_BOOL:
      return (rep ? r->GetRepeatedBool(m, f, i) : r->GetBool(m, f)) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_ENUM:
      return (rep ? r->GetRepeatedEnum(m, f, i) : r->GetEnum(m, f))->name();
    case FieldDescriptor::CPPTYPE_STRING: {
      const std::string s = rep ? r->GetRepeatedString(m, f, i) : r->GetString(m, f);
      if (f->type() == FieldDescriptor::TYPE_BYTES) return absl::StrCat("<", s.size(), " bytes>");
      return s;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return "";
}

void Flatten(const Message& m, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>* out) {
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  const Reflection* r = m.GetReflection();
  for (int k = 0; k < d->field_count(); ++k) {
    const FieldDescriptor* f = d->field(k);
    const std::string name = prefix + f->name();
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(m, f); ++i) {
          Flatten(r->GetRepeatedMessage(m, f, i), absl::StrCat(name, "[", i, "]."), out);
        }
      } else {
        Flatten(r->GetMessage(m, f), name + ".", out);
      }
    } else if (f->is_repeated()) {
      std::vector<std::string> items;
      for (int i = 0; i < r->FieldSize(m, f); ++i) items.push_back(ScalarText(m, f, i));
      out->emplace_back(name, absl::StrJoin(items, ","));
    } else {
      out->emplace_back(name, ScalarText(m, f, -1));
    }
  }
}

}  // namespace

std::string TextTable::Render(int indent) const {
  std::vector<size_t> width(header_.size(), 0);
  auto widen = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  };
  widen(header_);
  for (const auto& row : rows_) widen(row);
  std::string out;
  auto line = [&](const std::vector<std::string>& row) {
    std::string text(indent, ' ');
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) {
      if (c > 0) text.append(2, ' ');
      text += row[c];
      if (c + 1 < row.size()) text.append(width[c] - row[c].size(), ' ');
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text;
    out += '\n';
  };
  line(header_);
  for (const auto& row : rows_) line(row);
  return out;
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_ += '{';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  out_ += '}';
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_ += '[';
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  out_ += ']';
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::Key(absl::string_view key) {
  BeforeValue();
  Quoted(key);
  out_ += ':';
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(absl::string_view value) {
  BeforeValue();
  Quoted(value);
  return *this;
}

void JsonWriter::Quoted(absl::string_view value) {
  out_ += '"';
  for (unsigned char c : value) {
    switch (c) {
      case '"':
        out_ += "\\\"";
        break;
      case '\\':
        out_ += "\\\\";
        break;
      case '\n':
        out_ += "\\n";
        break;
      case '\r':
        out_ += "\\r";
        break;
      case '\t':
        out_ += "\\t";
        break;
      default:
        if (c < 0x20) {
          out_ += absl::StrFormat("\\u%04x", c);
        } else {
          out_ += static_cast<char>(c);
        }
    }
  }
  out_ += '"';
}

JsonWriter& JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  absl::StrAppend(&out_, value);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  BeforeValue();
  absl::StrAppend(&out_, value);
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  if (!std::isfinite(value)) return Null();
  BeforeValue();
  out_ += ShortestText(value);
  return *this;
}

JsonWriter& JsonWriter::Float(float value) {
  if (!std::isfinite(value)) return Null();
  BeforeValue();
  out_ += ShortestText(value);
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

void JsonWriter::ProtoField(const Message& m, const FieldDescriptor* f, int i) {
  const Reflection* r = m.GetReflection();
  const bool rep = i >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      Int(rep ? r->GetRepeatedInt32(m, f, i) : r->GetInt32(m, f));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      Int(rep ? r->GetRepeatedInt64(m, f, i) : r->GetInt64(m, f));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      Uint(rep ? r->GetRepeatedUInt32(m, f, i) : r->GetUInt32(m, f));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      Uint(rep ? r->GetRepeatedUInt64(m, f, i) : r->GetUInt64(m, f));
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      Float(rep ? r->GetRepeatedFloat(m, f, i) : r->GetFloat(m, f));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      Double(rep ? r->GetRepeatedDouble(m, f, i) : r->GetDouble(m, f));
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      Bool(rep ? r->GetRepeatedBool(m, f, i) : r->GetBool(m, f));
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      String((rep ? r->GetRepeatedEnum(m, f, i) : r->GetEnum(m, f))->name());
      break;
    case FieldDescriptor::CPPTYPE_STRING:
      String(rep ? r->GetRepeatedString(m, f, i) : r->GetString(m, f));
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      Proto(rep ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f));
      break;
  }
}

JsonWriter& JsonWriter::Proto(const Message& m) {
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  const Reflection* r = m.GetReflection();
  BeginObject();
  for (int k = 0; k < d->field_count(); ++k) {
    const FieldDescriptor* f = d->field(k);
    if (f->type() == FieldDescriptor::TYPE_BYTES) continue;
    Key(f->name());
    if (f->is_repeated()) {
      BeginArray();
      for (int i = 0; i < r->FieldSize(m, f); ++i) ProtoField(m, f, i);
      EndArray();
    } else {
      ProtoField(m, f, -1);
    }
  }
  return EndObject();
}

std::vector<std::pair<std::string, std::string>> FlattenProto(const Message& message) {
  std::vector<std::pair<std::string, std::string>> out;
  Flatten(message, "", &out);
  return out;
}

std::string HumanBytes(uint64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit + 1 < 6) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string Megabytes(double bytes) { return absl::StrFormat("%.1f MB", bytes / 1e6); }

std::string FloatText(float value) { return ShortestText(value); }
std::string DoubleText(double value) { return ShortestText(value); }

std::string Fixed(double value, int digits) { return absl::StrFormat("%.*f", digits, value); }

std::string UtcMicros(int64_t unix_micros) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMicros(unix_micros),
                          absl::UTCTimeZone());
}

std::string LowerName(absl::string_view name) { return absl::AsciiStrToLower(name); }

}  // namespace ember::ctl
