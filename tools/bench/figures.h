// Copyright 2026 The Ember Authors.
//
// Figures: the named results of one benchmark suite run, in the order they were added.
//
// `ember-bench SUITE --json` prints them as exactly one flat JSON object
// ({"name": value, ...}); without --json as a two-column table. Names are
// lower_snake_case and documented in docs/PERFORMANCE.md; a name is added at most once.
//
// Example:
//   Figures f;
//   f.AddNumber("pull_1m_keys_per_sec", 3.9e6);
//   f.AddBool("pull_vs_gather_met", true);
//   std::cout << f.ToJson() << "\n";

#ifndef EMBER_TOOLS_BENCH_FIGURES_H_
#define EMBER_TOOLS_BENCH_FIGURES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ember::bench {

class Figures {
 public:
  using Value = std::variant<double, int64_t, bool, std::string>;

  // Adds a figure, or replaces the value of an existing one (keeping its position).
  void AddNumber(std::string_view name, double value) { Add(name, value); }
  void AddInt(std::string_view name, int64_t value) { Add(name, value); }
  void AddBool(std::string_view name, bool value) { Add(name, value); }
  void AddString(std::string_view name, std::string value) { Add(name, std::move(value)); }

  // The numeric value (double or int) of `name`, if present.
  std::optional<double> Number(std::string_view name) const;

  // One JSON object on one line. Non-finite numbers print as null.
  std::string ToJson() const;
  // One "name  value" line per figure.
  std::string ToTable() const;

 private:
  void Add(std::string_view name, Value value);

  std::vector<std::pair<std::string, Value>> figures_;
};

}  // namespace ember::bench

#endif  // EMBER_TOOLS_BENCH_FIGURES_H_
