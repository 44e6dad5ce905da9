// Copyright 2026 The Ember Authors.

#include "tools/datagen/generator.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "tools/datagen/output_file.h"
#include "tools/datagen/random.h"
#include "tools/datagen/world.h"

namespace ember::datagen {
namespace {

namespace fs = std::filesystem;

// The files' random streams (Rng::ForStream; tools/datagen/world.cc holds the
// world's). The conversions have their own, so the click draws stay the same.
enum Stream : uint64_t {
  kTrainStream = 10,
  kTestStream = 11,
  kTrainConversionStream = 12,
  kTestConversionStream = 13,
};

constexpr char kHeader[] =
    "label\tuser_id\titem_id\tcategory_id\tshop_id\tuser_segment\thour\tdevice\trecent_items\t"
    "price\tuser_age\tsession_depth";
constexpr char kTestHeaderExtra[] = "\ttrue_prob\titem_train_count\tcold_user";
// With conversions: after the training columns, and after the test columns.
constexpr char kTrainHeaderConversions[] = "\ttrue_prob\tconverted\ttrue_cvr_prob";
constexpr char kHeaderConversions[] = "\tconverted\ttrue_cvr_prob";
constexpr int kMaxThreads = 8;  // each holds per-item and per-user counts
constexpr uint64_t kProgressChunk = 100000;
constexpr uint64_t kProgressEvery = 10000000;

// Appends `value` formatted by std::to_chars (locale-independent, exact).
template <typename T, typename... Format>
void AppendNumber(std::string* out, T value, Format... format) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, format...);
  out->append(buffer, result.ptr);
}

// The common columns of one line, without the newline.
void AppendExample(const Example& e, std::string* out) {
  AppendNumber(out, e.label);
  for (uint64_t id : {e.user_id, e.item_id, e.category_id, e.shop_id}) {
    out->push_back('\t');
    AppendNumber(out, id);
  }
  for (uint32_t id : {e.user_segment, e.hour, e.device}) {
    out->push_back('\t');
    AppendNumber(out, id);
  }
  out->push_back('\t');
  for (int r = 0; r < e.num_recent; ++r) {
    if (r > 0) out->push_back('|');
    AppendNumber(out, e.recent[r]);
  }
  out->push_back('\t');
  AppendNumber(out, e.price, std::chars_format::fixed, 2);
  out->push_back('\t');
  AppendNumber(out, e.user_age, std::chars_format::fixed, 1);
  out->push_back('\t');
  AppendNumber(out, e.session_depth);
}

// The conversion columns (converted, true_cvr_prob), each after a tab. The
// probability as written (shortest round-trip float) is what the oracle uses.
void AppendConversion(const Example& e, std::string* out) {
  out->push_back('\t');
  AppendNumber(out, e.converted);
  out->push_back('\t');
  AppendNumber(out, static_cast<float>(e.cvr_prob));
}

std::string PartName(uint32_t index, bool gzip) {
  char name[32];
  std::snprintf(name, sizeof(name), "part-%05u.tsv%s", index, gzip ? ".gz" : "");
  return name;
}

absl::Status FsError(const std::string& what, const fs::path& path, const std::error_code& ec) {
  return absl::PermissionDeniedError(absl::StrCat(what, " ", path.string(), ": ", ec.message()));
}

// Creates `dir` and removes its part-* files (left from an earlier run).
absl::Status PrepareDirectory(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return FsError("cannot create directory", dir, ec);
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().filename().string().rfind("part-", 0) == 0) fs::remove(it->path(), ec);
  }
  if (ec) return FsError("cannot clean directory", dir, ec);
  return absl::OkStatus();
}

absl::Status WriteText(const fs::path& path, const std::string& text) {
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> file, OutputFile::Open(path, false));
  EMBER_RETURN_IF_ERROR(file->Append(text));
  return file->Close();
}

// `value` with 6 decimals, or in its shortest round-trip form when `format` is null;
// NaN and infinities as null.
std::string JsonNumber(double value, const char* format = nullptr) {
  if (!std::isfinite(value)) return "null";
  if (format == nullptr) {
    std::string out;
    AppendNumber(&out, value);
    return out;
  }
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

// What writing the training files learns about them.
struct TrainCounts {
  std::vector<uint64_t> item_count;  // index item_id - 1
  std::vector<uint8_t> user_seen;    // index user_id - 1, training population only
  uint64_t examples = 0;
  uint64_t positives = 0;
  uint64_t conversions = 0;
};

class TrainWriter {
 public:
  TrainWriter(const World& world, const DatagenOptions& options, const fs::path& dir,
              std::ostream& log)
      : world_(world), options_(options), dir_(dir), log_(log) {}

  // Writes every training file on `threads` threads; merges their counts.
  absl::StatusOr<TrainCounts> Run(int threads) {
    std::vector<TrainCounts> counts(threads);
    std::vector<absl::Status> statuses(threads);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      counts[t].item_count.assign(options_.items, 0);
      counts[t].user_seen.assign(options_.users, 0);
      workers.emplace_back([this, &counts, &statuses, t] {
        for (uint32_t f;
             statuses[t].ok() && (f = next_file_.fetch_add(1)) < options_.train_files;) {
          statuses[t] = WriteFile(f, &counts[t]);
        }
      });
    }
    for (std::thread& worker : workers) worker.join();
    for (const absl::Status& status : statuses) EMBER_RETURN_IF_ERROR(status);
    TrainCounts total = std::move(counts[0]);
    for (int t = 1; t < threads; ++t) {
      for (size_t i = 0; i < total.item_count.size(); ++i) {
        total.item_count[i] += counts[t].item_count[i];
      }
      for (size_t u = 0; u < total.user_seen.size(); ++u) {
        total.user_seen[u] |= counts[t].user_seen[u];
      }
      total.examples += counts[t].examples;
      total.positives += counts[t].positives;
      total.conversions += counts[t].conversions;
    }
    return total;
  }

 private:
  absl::Status WriteFile(uint32_t index, TrainCounts* counts) {
    const absl::Time start = absl::Now();
    const uint64_t n = options_.train_examples / options_.train_files +
                       (index < options_.train_examples % options_.train_files ? 1 : 0);
    const fs::path path = dir_ / PartName(index, options_.gzip);
    EMBER_ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> file,
                           OutputFile::Open(path.string(), options_.gzip));
    Rng rng = Rng::ForStream(options_.seed, kTrainStream, index);
    Rng conversion_rng = Rng::ForStream(options_.seed, kTrainConversionStream, index);
    const bool conversions = options_.conversions;
    std::string line = absl::StrCat(kHeader, conversions ? kTrainHeaderConversions : "", "\n");
    EMBER_RETURN_IF_ERROR(file->Append(line));
    Example example;
    uint64_t positives = 0;
    uint64_t converted = 0;
    for (uint64_t i = 0; i < n; ++i) {
      world_.SampleExample(world_.SampleTrainUser(rng), rng, &example);
      line.clear();
      AppendExample(example, &line);
      if (conversions) {
        world_.SampleConversion(conversion_rng, &example);
        line.push_back('\t');
        AppendNumber(&line, static_cast<float>(example.prob));
        AppendConversion(example, &line);
        converted += example.converted;
      }
      line.push_back('\n');
      EMBER_RETURN_IF_ERROR(file->Append(line));
      ++counts->item_count[example.item_id - 1];
      counts->user_seen[example.user_id - 1] = 1;
      positives += example.label;
      if ((i + 1) % kProgressChunk == 0) ReportProgress(kProgressChunk);
    }
    ReportProgress(n % kProgressChunk);
    EMBER_RETURN_IF_ERROR(file->Close());
    counts->examples += n;
    counts->positives += positives;
    counts->conversions += converted;
    absl::MutexLock lock(&log_mutex_);
    log_ << "wrote " << path.string() << ": " << n << " examples, ctr "
         << (n > 0 ? static_cast<double>(positives) / n : 0.0) << ", "
         << absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(1)))
         << std::endl;
    return absl::OkStatus();
  }

  // Prints a line whenever the examples written cross a multiple of kProgressEvery.
  void ReportProgress(uint64_t examples) {
    const uint64_t before = written_.fetch_add(examples);
    if (before / kProgressEvery == (before + examples) / kProgressEvery) return;
    absl::MutexLock lock(&log_mutex_);
    log_ << "train: " << before + examples << " / " << options_.train_examples << " examples"
         << std::endl;
  }

  const World& world_;
  const DatagenOptions& options_;
  const fs::path dir_;
  std::ostream& log_;
  absl::Mutex log_mutex_;
  std::atomic<uint32_t> next_file_{0};
  std::atomic<uint64_t> written_{0};
};

// The fields of --cross_fields; INVALID_ARGUMENT naming the flag for an unknown or
// repeated name or fewer than two.
absl::StatusOr<std::vector<CrossField>> ParseCrossFields(const std::string& text) {
  static constexpr std::pair<const char*, CrossField> kFields[] = {
      {"user", CrossField::kUser},         {"item", CrossField::kItem},
      {"category", CrossField::kCategory}, {"shop", CrossField::kShop},
      {"segment", CrossField::kSegment},   {"hour", CrossField::kHour},
      {"device", CrossField::kDevice}};
  std::vector<CrossField> fields;
  for (absl::string_view name : absl::StrSplit(text, ',')) {
    const auto* known = std::find_if(std::begin(kFields), std::end(kFields),
                                     [&](const auto& f) { return name == f.first; });
    if (known == std::end(kFields)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--cross_fields: unknown field '", name,
                       "'; want two or more of user, item, category, shop, segment, hour, device"));
    }
    if (std::find(fields.begin(), fields.end(), known->second) != fields.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--cross_fields: field '", name, "' appears twice"));
    }
    fields.push_back(known->second);
  }
  if (fields.size() < 2) {
    return absl::InvalidArgumentError("--cross_fields: want two or more fields");
  }
  return fields;
}

}  // namespace

absl::Status Validate(const DatagenOptions& o) {
  if (o.out.empty()) return absl::InvalidArgumentError("--out is required");
  if (o.train_examples == 0) return absl::InvalidArgumentError("--train_examples must be >= 1");
  if (o.train_files == 0 || o.train_files > 100000) {
    return absl::InvalidArgumentError("--train_files must be in [1, 100000]");
  }
  constexpr uint64_t kMaxEntities = 100000000;  // the world keeps ~50 bytes per entity
  for (const auto& [name, value] : {std::pair<const char*, uint64_t>{"users", o.users},
                                    {"items", o.items},
                                    {"categories", o.categories},
                                    {"shops", o.shops}}) {
    if (value == 0 || value > kMaxEntities) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " must be in [1, 100000000]"));
    }
  }
  if (!(o.zipf >= 0 && o.zipf <= 10)) {
    return absl::InvalidArgumentError("--zipf must be in [0, 10]");
  }
  if (!(o.cold_user_fraction >= 0 && o.cold_user_fraction <= 1)) {
    return absl::InvalidArgumentError("--cold_user_fraction must be in [0, 1]");
  }
  if (!(o.cross >= 0 && o.cross <= 10)) {
    return absl::InvalidArgumentError("--cross must be in [0, 10]");
  }
  if (absl::StatusOr<std::vector<CrossField>> fields = ParseCrossFields(o.cross_fields);
      !fields.ok()) {
    return fields.status();
  }
  if (o.threads < 0) return absl::InvalidArgumentError("threads must be >= 0");
  return absl::OkStatus();
}

double ExactAuc(const std::vector<float>& scores, const std::vector<uint8_t>& labels) {
  std::vector<uint32_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return scores[a] < scores[b]; });
  // Sum of the (1-based, tie-averaged) ranks of the positives: Mann-Whitney U.
  double positive_rank_sum = 0;
  uint64_t positives = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    uint64_t group_positives = 0;
    while (j < order.size() && scores[order[j]] == scores[order[i]])
      group_positives += labels[order[j++]];
    positive_rank_sum += group_positives * (static_cast<double>(i + 1 + j) / 2);
    positives += group_positives;
    i = j;
  }
  const uint64_t negatives = scores.size() - positives;
  if (positives == 0 || negatives == 0) return std::numeric_limits<double>::quiet_NaN();
  const double p = static_cast<double>(positives);
  return (positive_rank_sum - p * (p + 1) / 2) / (p * static_cast<double>(negatives));
}

namespace {

// The test examples as written: their true probabilities and labels, and how many
// came from cold users; with conversions also the true conversion probabilities and
// the conversions.
struct TestData {
  std::vector<float> probs;
  std::vector<uint8_t> labels;
  std::vector<float> cvr_probs;
  std::vector<uint8_t> converted;
  uint64_t cold_examples = 0;
};

// Writes the test data: one stream, after training (it needs the training counts).
absl::StatusOr<TestData> WriteTest(const DatagenOptions& options, const World& world,
                                   uint64_t cold_users, const TrainCounts& train,
                                   const fs::path& out, std::ostream& log) {
  const fs::path test_path = out / "test" / PartName(0, options.gzip);
  EMBER_ASSIGN_OR_RETURN(std::unique_ptr<OutputFile> test_file,
                         OutputFile::Open(test_path.string(), options.gzip));
  std::string line =
      absl::StrCat(kHeader, kTestHeaderExtra, options.conversions ? kHeaderConversions : "", "\n");
  EMBER_RETURN_IF_ERROR(test_file->Append(line));
  Rng rng = Rng::ForStream(options.seed, kTestStream, 0);
  Rng conversion_rng = Rng::ForStream(options.seed, kTestConversionStream, 0);
  TestData data;
  std::vector<float>& probs = data.probs;
  std::vector<uint8_t>& labels = data.labels;
  probs.resize(options.test_examples);
  labels.resize(options.test_examples);
  Example example;
  for (uint64_t i = 0; i < options.test_examples; ++i) {
    const bool cold = cold_users > 0 && rng.Bernoulli(options.cold_user_fraction);
    uint64_t user;
    if (cold) {
      user = world.SampleColdUser(rng);
    } else {
      do user = world.SampleTrainUser(rng);
      while (!train.user_seen[user - 1]);
    }
    world.SampleExample(user, rng, &example);
    line.clear();
    AppendExample(example, &line);
    // The probability as written (shortest round-trip float) is what the oracle uses.
    probs[i] = static_cast<float>(example.prob);
    labels[i] = static_cast<uint8_t>(example.label);
    line.push_back('\t');
    AppendNumber(&line, probs[i]);
    line.push_back('\t');
    AppendNumber(&line, train.item_count[example.item_id - 1]);
    line += cold ? "\t1" : "\t0";
    if (options.conversions) {
      world.SampleConversion(conversion_rng, &example);
      AppendConversion(example, &line);
      data.cvr_probs.push_back(static_cast<float>(example.cvr_prob));
      data.converted.push_back(static_cast<uint8_t>(example.converted));
    }
    line.push_back('\n');
    EMBER_RETURN_IF_ERROR(test_file->Append(line));
    data.cold_examples += cold;
  }
  EMBER_RETURN_IF_ERROR(test_file->Close());
  log << "wrote " << test_path.string() << ": " << options.test_examples << " examples"
      << std::endl;
  return data;
}

// Mean log loss of `probs` against 0/1 `labels`; NaN when empty.
double LogLoss(const std::vector<float>& probs, const std::vector<uint8_t>& labels) {
  double logloss = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    const double p = std::clamp<double>(probs[i], 1e-15, 1 - 1e-15);
    logloss -= labels[i] ? std::log(p) : std::log1p(-p);
  }
  return probs.empty() ? std::numeric_limits<double>::quiet_NaN() : logloss / probs.size();
}

// The conversion oracle's figures over the test data, and the conversion rates.
void SummarizeConversions(const TrainCounts& train, const TestData& test, DatagenSummary* summary) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  summary->train_cvr =
      train.positives > 0 ? static_cast<double>(train.conversions) / train.positives : kNaN;
  std::vector<float> clicked_probs;
  std::vector<uint8_t> clicked_converted;
  std::vector<float> ctcvr_probs(test.probs.size());
  for (size_t i = 0; i < test.probs.size(); ++i) {
    // As a reader computes it from the written columns.
    ctcvr_probs[i] = test.probs[i] * test.cvr_probs[i];
    if (test.labels[i]) {
      clicked_probs.push_back(test.cvr_probs[i]);
      clicked_converted.push_back(test.converted[i]);
    }
  }
  summary->test_clicks = clicked_probs.size();
  const uint64_t conversions =
      std::accumulate(test.converted.begin(), test.converted.end(), uint64_t{0});
  summary->test_cvr =
      summary->test_clicks > 0 ? static_cast<double>(conversions) / summary->test_clicks : kNaN;
  summary->cvr_oracle_auc = ExactAuc(clicked_probs, clicked_converted);
  summary->cvr_oracle_logloss = LogLoss(clicked_probs, clicked_converted);
  summary->ctcvr_oracle_auc = ExactAuc(ctcvr_probs, test.converted);
  summary->ctcvr_oracle_logloss = LogLoss(ctcvr_probs, test.converted);
}

// The summary of the generated data (seconds not set).
DatagenSummary Summarize(const DatagenOptions& options, const TrainCounts& train,
                         const TestData& test) {
  const std::vector<float>& probs = test.probs;
  const std::vector<uint8_t>& labels = test.labels;
  DatagenSummary summary;
  summary.train_examples = train.examples;
  summary.test_examples = options.test_examples;
  summary.train_ctr = static_cast<double>(train.positives) / train.examples;
  const uint64_t test_positives = std::accumulate(labels.begin(), labels.end(), uint64_t{0});
  summary.test_ctr = options.test_examples > 0
                         ? static_cast<double>(test_positives) / options.test_examples
                         : std::numeric_limits<double>::quiet_NaN();
  summary.oracle_auc = ExactAuc(probs, labels);
  summary.oracle_logloss = LogLoss(probs, labels);
  summary.cold_user_fraction = options.test_examples > 0
                                   ? static_cast<double>(test.cold_examples) / options.test_examples
                                   : std::numeric_limits<double>::quiet_NaN();
  std::vector<uint64_t> item_counts = train.item_count;
  const size_t top = std::max<size_t>(1, item_counts.size() / 100);
  std::partial_sort(item_counts.begin(), item_counts.begin() + top, item_counts.end(),
                    std::greater<>());
  summary.top1pct_item_share = static_cast<double>(std::accumulate(
                                   item_counts.begin(), item_counts.begin() + top, uint64_t{0})) /
                               train.examples;
  if (options.conversions) SummarizeConversions(train, test, &summary);
  return summary;
}

// Writes oracle.json (the oracle's test metrics) and datagen.json (the options).
absl::Status WriteReports(const DatagenOptions& options, const DatagenSummary& summary,
                          const World& world, uint64_t cold_users, const fs::path& out) {
  EMBER_RETURN_IF_ERROR(WriteText(
      out / "oracle.json",
      absl::StrCat(
          "{\"test_auc\": ", JsonNumber(summary.oracle_auc, "%.6f"),
          ", \"test_logloss\": ", JsonNumber(summary.oracle_logloss, "%.6f"),
          ", \"test_examples\": ", summary.test_examples, ", \"train_examples\": ",
          summary.train_examples, ", \"base_ctr\": ", JsonNumber(summary.train_ctr, "%.6f"),
          ", \"cold_user_fraction\": ", JsonNumber(summary.cold_user_fraction, "%.6f"),
          options.conversions
              ? absl::StrCat(
                    ", \"cvr_test_auc\": ", JsonNumber(summary.cvr_oracle_auc, "%.6f"),
                    ", \"cvr_test_logloss\": ", JsonNumber(summary.cvr_oracle_logloss, "%.6f"),
                    ", \"cvr_test_examples\": ", summary.test_clicks,
                    ", \"ctcvr_test_auc\": ", JsonNumber(summary.ctcvr_oracle_auc, "%.6f"),
                    ", \"ctcvr_test_logloss\": ", JsonNumber(summary.ctcvr_oracle_logloss, "%.6f"),
                    ", \"base_cvr\": ", JsonNumber(summary.train_cvr, "%.6f"))
              : "",
          "}\n")));
  EMBER_RETURN_IF_ERROR(WriteText(
      out / "datagen.json",
      absl::StrCat(
          "{\"out\": ", JsonString(options.out), ", \"train_examples\": ", options.train_examples,
          ", \"test_examples\": ", options.test_examples,
          ", \"train_files\": ", options.train_files, ", \"users\": ", options.users,
          ", \"items\": ", options.items, ", \"categories\": ", options.categories,
          ", \"shops\": ", options.shops, ", \"zipf\": ", JsonNumber(options.zipf),
          ", \"cold_user_fraction\": ", JsonNumber(options.cold_user_fraction),
          ", \"seed\": ", options.seed, ", \"gzip\": ", options.gzip ? "true" : "false",
          ", \"cold_users\": ", cold_users, ", \"true_bias\": ", JsonNumber(world.bias()),
          options.conversions ? absl::StrCat(", \"conversions\": true, \"true_cvr_bias\": ",
                                             JsonNumber(world.conversion_bias()))
                              : "",
          options.cross > 0 ? absl::StrCat(", \"cross\": ", JsonNumber(options.cross),
                                           ", \"cross_fields\": ", JsonString(options.cross_fields))
                            : "",
          "}\n")));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DatagenSummary> Generate(const DatagenOptions& options, std::ostream& log) {
  EMBER_RETURN_IF_ERROR(Validate(options));
  const absl::Time start = absl::Now();
  const fs::path out(options.out);
  EMBER_RETURN_IF_ERROR(PrepareDirectory(out / "train"));
  EMBER_RETURN_IF_ERROR(PrepareDirectory(out / "test"));

  WorldOptions world_options;
  world_options.users = options.users;
  world_options.cold_users =
      options.cold_user_fraction > 0 ? std::max<uint64_t>(1, options.users / 10) : 0;
  world_options.items = options.items;
  world_options.categories = options.categories;
  world_options.shops = options.shops;
  world_options.zipf = options.zipf;
  world_options.seed = options.seed;
  world_options.conversions = options.conversions;
  world_options.cross_weight = options.cross;
  world_options.cross_fields = *ParseCrossFields(options.cross_fields);  // Validate checked it
  const World world(world_options);

  int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::clamp<int>(threads, 1, std::min<int>(kMaxThreads, options.train_files));
  log << "ember-datagen: " << options.train_examples << " train examples in " << options.train_files
      << " files, " << options.test_examples << " test examples, " << threads << " threads"
      << std::endl;
  TrainWriter train_writer(world, options, out / "train", log);
  EMBER_ASSIGN_OR_RETURN(const TrainCounts train, train_writer.Run(threads));

  EMBER_ASSIGN_OR_RETURN(const TestData test,
                         WriteTest(options, world, world_options.cold_users, train, out, log));
  DatagenSummary summary = Summarize(options, train, test);
  EMBER_RETURN_IF_ERROR(WriteReports(options, summary, world, world_options.cold_users, out));
  summary.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return summary;
}

}  // namespace ember::datagen
