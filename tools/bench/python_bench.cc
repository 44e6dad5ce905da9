// Copyright 2026 The Ember Authors.
//
// The `python` suite: the quickstart DLRM in PyTorch on ember.torch (1 worker + 1 PS)
// against the same model with local tables (tools/bench/torch_reference.py) and
// against ember-worker, on the same data in one run. tools/bench/python_bench.py runs
// the three and prints their figures as one JSON object; this suite passes them on.
//
// Figures (docs/PERFORMANCE.md "Python and PyTorch"): {python,torch,native}_auc and
// _examples_per_sec, python_vs_torch (target >= 1.0), python_vs_native (target >= 0.6),
// python_auc_minus_native (target within 0.003), python_stage_* (the share of
// ember.torch's step time in pull, compute, exchange, push, all_reduce).

#include <cstdio>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "tools/bench/cluster_fixtures.h"
#include "tools/bench/suite.h"

namespace ember::bench {
namespace {

absl::StatusOr<Figures> RunPythonSuite(const BenchOptions& options) {
  const std::string bin = cluster::ExecutableDir();
  if (bin.empty()) return absl::InternalError("cannot read /proc/self/exe");
  const std::string source = EMBER_SOURCE_DIR;
  const std::string scratch = options.dir.empty() ? "/tmp/ember-bench-python" : options.dir;
  const std::string command =
      absl::StrCat("PYTHONPATH=", bin, "/../python /usr/bin/python3 ", source,
                   "/tools/bench/python_bench.py --bin=", bin, " --scratch=", scratch,
                   " --train_examples=", options.train_examples, " --seed=", options.seed);
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("cannot run ", command));
  std::string out;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  if (const int status = pclose(pipe); status != 0) {
    return absl::InternalError(absl::StrCat("`", command, "` failed (status ", status, ")"));
  }
  // The flat JSON object of the last line: numbers and booleans, in order.
  const std::string last = out.substr(
      out.find_last_of('{') == std::string::npos ? 0 : out.rfind('{', out.find_last_of('{')));
  Figures figures;
  const std::regex pair("\"([a-z0-9_]+)\": *(true|false|-?[0-9.eE+-]+)");
  for (std::sregex_iterator it(last.begin(), last.end(), pair), end; it != end; ++it) {
    const std::string name = (*it)[1].str(), value = (*it)[2].str();
    if (value == "true" || value == "false") {
      figures.AddBool(name, value == "true");
    } else {
      figures.AddNumber(name, std::stod(value));
    }
  }
  if (!figures.Number("python_examples_per_sec").has_value()) {
    return absl::InternalError(absl::StrCat("python_bench.py printed no figures: ", out));
  }
  return figures;
}

}  // namespace

EMBER_BENCH_SUITE(python,
                  "the quickstart DLRM on ember.torch vs local PyTorch tables vs ember-worker",
                  RunPythonSuite);

}  // namespace ember::bench
