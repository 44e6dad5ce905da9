// Copyright 2026 The Ember Authors.
//
// GroupedBarChart: a small, dependency-free SVG bar chart for benchmark plots
// (docs/images/*.svg). Groups along the x axis, one bar per series in each group,
// a y axis from `y_min` (default 0) to a rounded maximum, a legend and an optional
// horizontal reference line (a target).
//
//   GroupedBarChart chart("Per-shard load", "keys served / mean");
//   chart.SetSeries({"plain", "replicated"});
//   chart.AddGroup("shard 0", {1.8, 1.0});
//   chart.SetReferenceLine(1.25, "target");
//   EMBER_RETURN_IF_ERROR(chart.WriteSvg("/tmp/load.svg"));

#ifndef EMBER_TOOLS_BENCH_SVG_CHART_H_
#define EMBER_TOOLS_BENCH_SVG_CHART_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ember::bench {

class GroupedBarChart {
 public:
  GroupedBarChart(std::string title, std::string y_label)
      : title_(std::move(title)), y_label_(std::move(y_label)) {}

  void SetSeries(std::vector<std::string> names) { series_ = std::move(names); }
  // REQUIRES: values.size() == series count. NaN values draw no bar.
  void AddGroup(std::string label, std::vector<double> values) {
    groups_.push_back({std::move(label), std::move(values)});
  }
  void SetYMin(double y_min) { y_min_ = y_min; }
  void SetReferenceLine(double y, std::string label) {
    reference_ = y;
    reference_label_ = std::move(label);
  }

  std::string Svg() const;
  // Writes Svg() to `path` (directories created). INTERNAL on an IO error.
  absl::Status WriteSvg(const std::string& path) const;

 private:
  struct Group {
    std::string label;
    std::vector<double> values;
  };
  std::string title_, y_label_;
  std::vector<std::string> series_;
  std::vector<Group> groups_;
  double y_min_ = 0;
  std::optional<double> reference_;
  std::string reference_label_;
};

}  // namespace ember::bench

#endif  // EMBER_TOOLS_BENCH_SVG_CHART_H_
