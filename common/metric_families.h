// Copyright 2026 The Ember Authors.
//
// FamilyWriter: builds Prometheus metric families at scrape time, for collectors whose
// values are read from live state (a store, a follower) rather than kept in a Registry.
//
//   std::vector<prometheus::MetricFamily> Collect() const override {
//     std::vector<prometheus::MetricFamily> out;
//     FamilyWriter w(&out);
//     w.Gauge("ember_store_version", "Newest applied version.", store.version());
//     return out;
//   }

#ifndef EMBER_COMMON_METRIC_FAMILIES_H_
#define EMBER_COMMON_METRIC_FAMILIES_H_

#include <string>
#include <utility>
#include <vector>

#include "prometheus/metric_family.h"

namespace ember {

// Builds scrape-time families without a Registry.
class FamilyWriter {
 public:
  explicit FamilyWriter(std::vector<prometheus::MetricFamily>* out) : out_(out) {}

  void Gauge(std::string name, std::string help, double value) {
    Add(std::move(name), std::move(help), prometheus::MetricType::Gauge, {}, value);
  }
  void Counter(std::string name, std::string help, double value) {
    Add(std::move(name), std::move(help), prometheus::MetricType::Counter, {}, value);
  }
  // Adds one family with one sample per (label value, value) pair, all labelled `label`.
  void Labelled(std::string name, std::string help, prometheus::MetricType type,
                const std::string& label,
                const std::vector<std::pair<std::string, double>>& samples) {
    prometheus::MetricFamily family{std::move(name), std::move(help), type, {}};
    for (const auto& [label_value, value] : samples) {
      family.metric.push_back(Sample(type, {{label, label_value}}, value));
    }
    out_->push_back(std::move(family));
  }

 private:
  static prometheus::ClientMetric Sample(prometheus::MetricType type,
                                         std::vector<prometheus::ClientMetric::Label> labels,
                                         double value) {
    prometheus::ClientMetric m;
    m.label = std::move(labels);
    if (type == prometheus::MetricType::Counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    return m;
  }

  void Add(std::string name, std::string help, prometheus::MetricType type,
           std::vector<prometheus::ClientMetric::Label> labels, double value) {
    out_->push_back(prometheus::MetricFamily{
        std::move(name), std::move(help), type, {Sample(type, std::move(labels), value)}});
  }

  std::vector<prometheus::MetricFamily>* out_;
};

}  // namespace ember

#endif  // EMBER_COMMON_METRIC_FAMILIES_H_
