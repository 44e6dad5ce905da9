// Copyright 2026 The Ember Authors.

#include "tools/bench/figures.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"

namespace ember::bench {
namespace {

std::string FormatNumber(double v) {
  if (!std::isfinite(v)) return "null";
  // Rates in the millions read best without an exponent; ratios keep 4 digits.
  if (std::abs(v) >= 1e5) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.4g", v);
}

// A JSON string literal: the escaping is the logger's (common/log.h).
std::string JsonString(std::string_view s) {
  return absl::StrCat("\"", JsonEscape(absl::string_view(s.data(), s.size())), "\"");
}

std::string FormatValue(const Figures::Value& value, bool json) {
  if (const auto* d = std::get_if<double>(&value)) return FormatNumber(*d);
  if (const auto* i = std::get_if<int64_t>(&value)) return absl::StrCat(*i);
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  const auto& s = std::get<std::string>(value);
  return json ? JsonString(s) : s;
}

}  // namespace

void Figures::Add(std::string_view name, Value value) {
  for (auto& [n, v] : figures_) {
    if (n == name) {
      v = std::move(value);
      return;
    }
  }
  figures_.emplace_back(std::string(name), std::move(value));
}

std::optional<double> Figures::Number(std::string_view name) const {
  for (const auto& [n, v] : figures_) {
    if (n != name) continue;
    if (const auto* d = std::get_if<double>(&v)) return *d;
    if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
    return std::nullopt;
  }
  return std::nullopt;
}

std::string Figures::ToJson() const {
  std::string out = "{";
  for (size_t i = 0; i < figures_.size(); ++i) {
    if (i > 0) out += ", ";
    absl::StrAppend(&out, JsonString(figures_[i].first), ": ",
                    FormatValue(figures_[i].second, /*json=*/true));
  }
  return out + "}";
}

std::string Figures::ToTable() const {
  size_t width = 0;
  for (const auto& [name, value] : figures_) width = std::max(width, name.size());
  std::string out;
  for (const auto& [name, value] : figures_) {
    absl::StrAppendFormat(&out, "%-*s  %s\n", static_cast<int>(width), name,
                          FormatValue(value, /*json=*/false));
  }
  return out;
}

}  // namespace ember::bench
