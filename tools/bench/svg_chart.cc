// Copyright 2026 The Ember Authors.

#include "tools/bench/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace ember::bench {
namespace {

constexpr const char* kColors[] = {"#7f8c8d", "#2471a3", "#c0392b",
                                   "#27ae60", "#8e44ad", "#d68910"};

std::string Escape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}});
}

// A "nice" axis maximum >= v: 1, 2 or 5 times a power of ten.
double NiceCeil(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

}  // namespace

std::string GroupedBarChart::Svg() const {
  const double width = std::max<double>(480, 90 + groups_.size() * (series_.size() * 22 + 26));
  const double height = 340, left = 64, right = 16, top = 40, bottom = 70;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  double y_max = y_min_;
  for (const Group& g : groups_) {
    for (double v : g.values) {
      if (std::isfinite(v)) y_max = std::max(y_max, v);
    }
  }
  if (reference_.has_value()) y_max = std::max(y_max, *reference_);
  y_max = y_min_ + NiceCeil((y_max - y_min_) * 1.05);
  auto y_of = [&](double v) { return top + plot_h * (1 - (v - y_min_) / (y_max - y_min_)); };

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n<text x=\"%.0f\" y=\"20\" font-size=\"14\" text-anchor=\"middle\">%s"
      "</text>\n",
      width, height, width / 2, Escape(title_));
  // Axis, grid and ticks.
  for (int i = 0; i <= 5; ++i) {
    const double v = y_min_ + (y_max - y_min_) * i / 5;
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n",
                          left, left + plot_w, y_of(v), y_of(v), left - 4, y_of(v) + 4,
                          std::round(v * 1000) / 1000);
  }
  absl::StrAppendFormat(&svg,
                        "<text transform=\"translate(14,%.1f) rotate(-90)\" "
                        "text-anchor=\"middle\">%s</text>\n",
                        top + plot_h / 2, Escape(y_label_));
  // Bars.
  const double group_w = groups_.empty() ? plot_w : plot_w / groups_.size();
  const double bar_w = std::min(22.0, (group_w - 12) / std::max<size_t>(1, series_.size()));
  for (size_t g = 0; g < groups_.size(); ++g) {
    const double x0 = left + g * group_w + (group_w - bar_w * series_.size()) / 2;
    for (size_t s = 0; s < groups_[g].values.size() && s < series_.size(); ++s) {
      const double v = groups_[g].values[s];
      if (!std::isfinite(v)) continue;
      const double y = y_of(std::max(v, y_min_));
      absl::StrAppendFormat(&svg,
                            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                            "fill=\"%s\"><title>%s: %g</title></rect>\n",
                            x0 + s * bar_w, y, bar_w - 2, top + plot_h - y, kColors[s % 6],
                            Escape(series_[s]), v);
    }
    absl::StrAppendFormat(&svg, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                          left + g * group_w + group_w / 2, top + plot_h + 16,
                          Escape(groups_[g].label));
  }
  if (reference_.has_value()) {
    absl::StrAppendFormat(
        &svg,
        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#c0392b\" "
        "stroke-dasharray=\"5,3\"/><text x=\"%.1f\" y=\"%.1f\" "
        "text-anchor=\"end\" fill=\"#c0392b\">%s</text>\n",
        left, left + plot_w, y_of(*reference_), y_of(*reference_), left + plot_w - 2,
        y_of(*reference_) - 3, Escape(reference_label_));
  }
  absl::StrAppendFormat(&svg,
                        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n",
                        left, left + plot_w, top + plot_h, top + plot_h);
  // Legend.
  double lx = left;
  for (size_t s = 0; s < series_.size(); ++s) {
    absl::StrAppendFormat(&svg,
                          "<rect x=\"%.1f\" y=\"%.1f\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                          "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
                          lx, height - 24, kColors[s % 6], lx + 14, height - 15,
                          Escape(series_[s]));
    lx += 24 + 7 * series_[s].size();
  }
  svg += "</svg>\n";
  return svg;
}

absl::Status GroupedBarChart::WriteSvg(const std::string& path) const {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream out(path);
  out << Svg();
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace ember::bench
