// Copyright 2026 The Ember Authors.

#include "worker/job/run_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ember::worker {
namespace {

// A JSON number, or null for NaN/absent (JSON has no NaN).
std::string Number(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}
std::string Number(const std::optional<double>& v) { return v.has_value() ? Number(*v) : "null"; }
std::string Hex(uint64_t v) { return absl::StrFormat("\"%016x\"", v); }
std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
      continue;
    }
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string ResultJson(const v1::ModelConfig& config, const TrainerOptions& options,
                       const TrainResult& r) {
  const TestSetResult& e = r.eval;
  std::vector<std::pair<std::string, std::string>> fields = {
      {"job", Quote(config.name())},
      {"test_auc", e.examples > 0 ? Number(e.auc) : "null"},
      {"test_logloss", e.examples > 0 ? Number(e.logloss) : "null"},
      {"oracle_auc", Number(e.oracle_auc)},
      {"oracle_logloss", Number(e.oracle_logloss)},
      {"oracle_auc_gap",
       e.oracle_auc.has_value() && e.examples > 0 ? Number(*e.oracle_auc - e.auc) : "null"},
      {"auc_hot", Number(e.auc_hot)},
      {"auc_warm", Number(e.auc_warm)},
      {"auc_cold", Number(e.auc_cold)},
      {"auc_cold_users", Number(e.auc_cold_users)},
      {"test_examples", absl::StrCat(e.examples)},
      {"test_examples_hot", absl::StrCat(e.examples_hot)},
      {"test_examples_warm", absl::StrCat(e.examples_warm)},
      {"test_examples_cold", absl::StrCat(e.examples_cold)},
      {"test_examples_cold_users", absl::StrCat(e.examples_cold_users)},
      {"examples_per_sec", Number(r.examples_per_sec)},
      {"train_seconds", Number(r.train_seconds)},
      {"steps", absl::StrCat(r.steps)},
      {"examples", absl::StrCat(r.examples)},
      {"examples_per_epoch", absl::StrCat("[", absl::StrJoin(r.examples_per_epoch, ", "), "]")},
      {"final_train_loss", Number(r.final_loss)},
      {"cold_examples", absl::StrCat(r.cold_examples)},
      {"resampled_examples", absl::StrCat(r.resampled_examples)},
      // null when the cache is off (or looked nothing up: no hot keys).
      {"hot_cache_hit_ratio",
       r.hot_cache && r.hot_cache_lookups > 0
           ? Number(static_cast<double>(r.hot_cache_hits) / r.hot_cache_lookups)
           : "null"},
      {"hot_cache_hits", absl::StrCat(r.hot_cache_hits)},
      {"hot_cache_lookups", absl::StrCat(r.hot_cache_lookups)},
      // Rank 0's mean milliseconds per step, by stage (TrainResult).
      {"step_pull_ms", Number(r.step_pull_ms)},
      {"step_compute_ms", Number(r.step_compute_ms)},
      {"step_exchange_ms", Number(r.step_exchange_ms)},
      {"step_push_ms", Number(r.step_push_ms)},
      {"step_allreduce_ms", Number(r.step_allreduce_ms)},
      {"workers", absl::StrCat(options.world_size)},
      {"consistency", Quote(v1::TrainingConfig::Consistency_Name(config.training().consistency()))},
      {"batch_size", absl::StrCat(config.training().batch_size())},
      {"epochs", absl::StrCat(config.training().epochs())},
      {"sparse_rows", absl::StrCat(r.sparse_rows)},
      {"sparse_checksum", Hex(r.sparse_checksum)},
      {"dense_checksum", Hex(r.dense_checksum)},
      {"model_checksum", Hex(r.model_checksum)},
      {"malformed_lines_rank0", absl::StrCat(r.malformed_lines)},
      {"attempt", absl::StrCat(r.attempt)},
      {"recoveries_rank0", absl::StrCat(r.recoveries)},
      {"resizes_rank0", absl::StrCat(r.resizes)},
      {"resumed_from", Quote(r.resumed_from)},
      {"checkpoints_last_attempt", absl::StrCat(r.checkpoints)},
  };
  // Multi-task models only (a single-task result.json is unchanged): per task its name,
  // kind, AUC, logloss, oracle AUC and positives; "click" is task 0 (test_auc above).
  if (config.dense().tasks_size() > 0) {
    std::vector<std::string> tasks = {absl::StrCat(
        "\"click\": {\"kind\": \"CLICK\", \"test_auc\": ", e.examples > 0 ? Number(e.auc) : "null",
        ", \"test_logloss\": ", e.examples > 0 ? Number(e.logloss) : "null",
        ", \"oracle_auc\": ", Number(e.oracle_auc), "}")};
    for (int t = 0; t < config.dense().tasks_size(); ++t) {
      const v1::TaskConfig& task = config.dense().tasks(t);
      const bool have = static_cast<size_t>(t) < e.tasks.size() && e.examples > 0;
      tasks.push_back(absl::StrCat(
          Quote(task.name()), ": {\"kind\": ", Quote(v1::TaskConfig::Kind_Name(task.kind())),
          ", \"test_auc\": ", have ? Number(e.tasks[t].auc) : "null",
          ", \"test_logloss\": ", have ? Number(e.tasks[t].logloss) : "null",
          ", \"oracle_auc\": ", have ? Number(e.tasks[t].oracle_auc) : "null",
          ", \"test_positives\": ", have ? absl::StrCat(e.tasks[t].positives) : "null",
          // ESMM: the CVR head over the clicked test examples.
          task.kind() == v1::TaskConfig::ESMM_CTCVR
              ? absl::StrCat(
                    ", \"cvr_auc_clicked\": ", have ? Number(e.tasks[t].cvr_auc_clicked) : "null",
                    ", \"cvr_oracle_auc_clicked\": ",
                    have ? Number(e.tasks[t].cvr_oracle_auc_clicked) : "null",
                    ", \"test_clicked\": ", have ? absl::StrCat(e.tasks[t].clicked) : "null")
              : "",
          "}"));
    }
    fields.emplace_back("tasks", absl::StrCat("{", absl::StrJoin(tasks, ", "), "}"));
  }
  std::string out = "{\n";
  for (size_t i = 0; i < fields.size(); ++i) {
    absl::StrAppend(&out, "  ", Quote(fields[i].first), ": ", fields[i].second,
                    i + 1 < fields.size() ? ",\n" : "\n");
  }
  return out + "}\n";
}

std::string CurvesSvg(const std::string& title, const std::vector<CurvePoint>& points) {
  constexpr double kW = 800, kH = 420, kLeft = 70, kRight = 70, kTop = 40, kBottom = 50;
  const double plot_w = kW - kLeft - kRight, plot_h = kH - kTop - kBottom;
  double max_step = 1, loss_lo = std::numeric_limits<double>::infinity(), loss_hi = -loss_lo;
  double auc_lo = loss_lo, auc_hi = -loss_lo;
  for (const CurvePoint& p : points) {
    max_step = std::max(max_step, static_cast<double>(p.step));
    if (p.loss > 0) loss_lo = std::min(loss_lo, p.loss), loss_hi = std::max(loss_hi, p.loss);
    if (p.test_auc) auc_lo = std::min(auc_lo, *p.test_auc), auc_hi = std::max(auc_hi, *p.test_auc);
  }
  auto pad = [](double* lo, double* hi) {
    if (!std::isfinite(*lo)) *lo = 0, *hi = 1;
    if (*hi - *lo < 1e-6) *lo -= 0.01, *hi += 0.01;
    const double m = (*hi - *lo) * 0.05;
    *lo -= m;
    *hi += m;
  };
  pad(&loss_lo, &loss_hi);
  pad(&auc_lo, &auc_hi);
  auto x = [&](double step) { return kLeft + plot_w * step / max_step; };
  auto y = [&](double v, double lo, double hi) {
    return kTop + plot_h * (1 - (v - lo) / (hi - lo));
  };

  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%g\" y=\"22\" font-size=\"15\">%s</text>\n"
      "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#888\"/>\n",
      static_cast<int>(kW), static_cast<int>(kH), kLeft, title, kLeft, kTop, plot_w, plot_h);
  for (int i = 0; i <= 4; ++i) {  // ticks: steps below, loss left, AUC right
    const double f = i / 4.0;
    absl::StrAppendFormat(&svg, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%d</text>\n",
                          kLeft + plot_w * f, kTop + plot_h + 18,
                          static_cast<int>(std::lround(max_step * f)));
    absl::StrAppendFormat(
        &svg, "<text x=\"%g\" y=\"%g\" text-anchor=\"end\" fill=\"#c0392b\">%.4f</text>\n",
        kLeft - 6, kTop + plot_h * (1 - f) + 4, loss_lo + (loss_hi - loss_lo) * f);
    absl::StrAppendFormat(&svg, "<text x=\"%g\" y=\"%g\" fill=\"#2471a3\">%.4f</text>\n",
                          kLeft + plot_w + 6, kTop + plot_h * (1 - f) + 4,
                          auc_lo + (auc_hi - auc_lo) * f);
  }
  absl::StrAppendFormat(
      &svg,
      "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">step</text>\n"
      "<text x=\"%g\" y=\"%g\" fill=\"#c0392b\">train loss</text>\n"
      "<text x=\"%g\" y=\"%g\" text-anchor=\"end\" fill=\"#2471a3\">test AUC</text>\n",
      kLeft + plot_w / 2, kH - 12, kLeft, kTop - 6, kLeft + plot_w, kTop - 6);
  std::vector<std::string> loss_pts, auc_pts;
  for (const CurvePoint& p : points) {
    if (p.loss > 0)
      loss_pts.push_back(absl::StrFormat("%.1f,%.1f", x(p.step), y(p.loss, loss_lo, loss_hi)));
    if (p.test_auc) {
      auc_pts.push_back(absl::StrFormat("%.1f,%.1f", x(p.step), y(*p.test_auc, auc_lo, auc_hi)));
    }
  }
  absl::StrAppend(&svg, "<polyline fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\" points=\"",
                  absl::StrJoin(loss_pts, " "), "\"/>\n");
  absl::StrAppend(&svg, "<polyline fill=\"none\" stroke=\"#2471a3\" stroke-width=\"2\" points=\"",
                  absl::StrJoin(auc_pts, " "), "\"/>\n");
  for (const std::string& pt : auc_pts) {
    const size_t comma = pt.find(',');
    absl::StrAppend(&svg, "<circle cx=\"", pt.substr(0, comma), "\" cy=\"", pt.substr(comma + 1),
                    "\" r=\"3\" fill=\"#2471a3\"/>\n");
  }
  return svg + "</svg>\n";
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.flush();
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::Status WriteRunDirectory(const std::string& run_dir, const v1::ModelConfig& config,
                               const TrainerOptions& options, const TrainResult& result,
                               const std::vector<CurvePoint>& points) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", run_dir, ": ", ec.message()));
  std::string tsv = "step\texamples\ttrain_loss\ttest_auc\ttest_logloss\n";
  for (const CurvePoint& p : points) {
    absl::StrAppend(&tsv, p.step, "\t", p.examples, "\t", p.loss > 0 ? Number(p.loss) : "", "\t",
                    p.test_auc ? Number(*p.test_auc) : "", "\t",
                    p.test_logloss ? Number(*p.test_logloss) : "", "\n");
  }
  const std::string title = absl::StrCat(
      config.name(), ": ", options.world_size, " worker(s), ",
      v1::TrainingConfig::Consistency_Name(config.training().consistency()),
      result.eval.examples > 0 ? absl::StrFormat(", test AUC %.4f", result.eval.auc) : "");
  const std::string dir = run_dir + "/";
  if (absl::Status s = WriteFileAtomically(dir + "metrics.tsv", tsv); !s.ok()) return s;
  if (absl::Status s = WriteFileAtomically(dir + "training.svg", CurvesSvg(title, points));
      !s.ok()) {
    return s;
  }
  return WriteFileAtomically(dir + "result.json", ResultJson(config, options, result));
}

}  // namespace ember::worker
