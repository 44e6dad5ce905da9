// Copyright 2026 The Ember Authors.
//
// The `skew` suite (issue 8): every skew feature against the same run without it,
// measured in one run on loopback clusters of real processes (skew_cluster.h).
//
//  1. Lookup load. 4 PS shards; two clients issue small pulls (16 Zipf-drawn keys of
//     1M, one example's worth, not deduplicated: the traffic of online feature
//     lookups or small-batch asynchronous trainers) and push every 8th batch back.
//     Per-shard keys served (pulled + answered from replicas + pushed, GetShardInfo)
//     over 5 s, max/mean, and the keys/s the clients got: plain, with hot-key
//     replication (--hot_replicas=3) refreshed synchronously (exact), and refreshed
//     every 100 ms; for Zipf 0.9 / 1.1 / 1.3.
//  2. Training. ember-datagen data with users and items drawn at Zipf 0.9 / 1.1 / 1.3;
//     2 BSP workers on 4 shards (configs/quickstart.pbtxt): plain; replication on with
//     the default hot threshold; and replication forced onto each table's top 64 keys
//     (--hot_min_share=0.0001). Test AUC, examples/s, per-shard load max/mean and the
//     share of pulled keys answered by replicas. Workers deduplicate the IDs of a batch
//     before pulling, so a hot ID costs its shard one key per batch, not one per example.
//  3. Cold IDs (Zipf 1.1 data, 2 workers on 2 shards): plain Adagrad, the
//     frequency-aware learning rate, cold-example loss weighting (x2), cold-example
//     re-sampling, admission (min_count 2 on users and items) and TTL eviction at
//     checkpoints: AUC overall, by item frequency bucket and on cold-start users;
//     stored rows and bytes per table.
//
// Figures (docs/PERFORMANCE.md "Skew"); for Zipf 1.1: load_max_over_mean_plain and
// load_max_over_mean_replicated (lookup traffic) and auc_change_replicated (training).
// Plots: <dir>/plots/skew_load.svg and skew_auc_buckets.svg.

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "common/hot_set.h"
#include "common/ps_client.h"
#include "common/status_macros.h"
#include "tools/bench/cluster_fixtures.h"
#include "tools/bench/skew_cluster.h"
#include "tools/bench/suite.h"
#include "tools/bench/svg_chart.h"
#include "tools/bench/zipf.h"
#include "tools/harness/result_json.h"

namespace ember::bench {
namespace {

constexpr int kShards = 4;
constexpr int kLookupKeys = 16;  // keys per lookup (one example)
constexpr uint64_t kLookupIds = 1'000'000;
constexpr int kLookupThreads = 2;
constexpr int kPushEvery = 8;  // one push per this many lookups
constexpr uint32_t kDim = 16;
constexpr double kZipfs[] = {0.9, 1.1, 1.3};
// Hot-key settings of every run (the plain runs publish a hot set too, unreplicated,
// so both sides pay for heavy-hitter tracking).
const std::vector<std::string> kHotFlags = {"--hot_keys_per_table=64",
                                            "--hot_publish_interval_ms=250"};
// Training deduplicates a batch's IDs, so no key reaches the default 1% share there
// (a key costs its shard at most one pull and one push per worker and step): the
// training runs use a threshold low enough that each table's top 64 keys are hot.
const std::vector<std::string> kTrainHotFlags = {
    "--hot_keys_per_table=64", "--hot_min_share=0.0001", "--hot_publish_interval_ms=250"};

void Say(const std::string& line) { std::fprintf(stderr, "skew: %s\n", line.c_str()); }

// The number `key` holds in a result.json, or NaN (absent or null).
double JsonNumber(const std::string& json, const std::string& key) {
  const std::string v = JsonValue(json, key);
  if (v.empty() || v == "null") return std::nan("");
  return std::strtod(v.c_str(), nullptr);
}

// The string `key` holds in a result.json, without its quotes ("" when absent).
std::string JsonString(const std::string& json, const std::string& key) {
  const std::string v = JsonValue(json, key);
  return v.size() >= 2 && v.front() == '"' ? v.substr(1, v.size() - 2) : "";
}

std::string ZipfName(double s) { return absl::StrFormat("zipf%.1f", s); }

absl::Status RunCommand(const std::string& command) {
  const int status = std::system(command.c_str());
  if (status != 0) {
    return absl::InternalError(absl::StrCat("`", command, "` failed (status ", status, ")"));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- 1. Lookup load

struct LookupRun {
  std::vector<double> load_over_mean;  // per shard
  double max_over_mean = 0;
  double keys_per_sec = 0;
  double replica_share = 0;  // of pulled keys, answered by replicas
};

// `refresh_ms`: 0 synchronous replica refresh (exact), > 0 periodic.
absl::StatusOr<LookupRun> RunLookupLoad(const std::string& bin, const std::string& dir,
                                        double zipf_s, bool replicated, int refresh_ms,
                                        uint64_t seed) {
  SkewCluster cluster(bin, dir);
  std::vector<std::string> flags = kHotFlags;
  if (replicated) {
    flags.push_back("--hot_replicas=3");
    flags.push_back(absl::StrCat("--hot_refresh_ms=", refresh_ms));
  }
  EMBER_RETURN_IF_ERROR(cluster.Start(kShards, flags));

  std::vector<std::unique_ptr<PsClient>> clients;
  for (int t = 0; t < kLookupThreads; ++t) {
    PsClientOptions options;
    options.coordinator_address = cluster.coordinator_address();
    options.worker_id = t + 1;
    options.deadline = absl::Seconds(10);
    options.max_retries = 12;
    // The coordinator assigns slots once every shard registered: wait for that.
    absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Create(options);
    for (const absl::Time give_up = absl::Now() + absl::Seconds(30);
         !client.ok() && absl::IsUnavailable(client.status()) && absl::Now() < give_up;) {
      absl::SleepFor(absl::Milliseconds(100));
      client = PsClient::Create(options);
    }
    EMBER_RETURN_IF_ERROR(client.status());
    clients.push_back(*std::move(client));
  }
  v1::TableConfig table;
  table.set_name("item");
  table.set_dim(kDim);
  table.set_seed(0x5eed);
  table.mutable_optimizer()->set_kind(v1::OptimizerConfig::ADAGRAD);
  EMBER_RETURN_IF_ERROR(clients[0]->CreateTableEverywhere(table));
  for (size_t t = 1; t < clients.size(); ++t) EMBER_RETURN_IF_ERROR(clients[t]->AddTable(table));

  std::atomic<bool> stop{false};
  std::atomic<bool> measuring{false};
  std::atomic<uint64_t> measured_keys{0};
  std::vector<absl::Status> errors(kLookupThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kLookupThreads; ++t) {
    threads.emplace_back([&, t] {
      absl::StatusOr<ZipfSampler> zipf = ZipfSampler::Create(kLookupIds, zipf_s, seed + t);
      if (!zipf.ok()) {
        errors[t] = zipf.status();
        return;
      }
      std::vector<uint64_t> ids(kLookupKeys);
      std::vector<float> rows(kLookupKeys * kDim);
      const std::vector<float> grads(kLookupKeys * kDim, 0.001f);
      for (int64_t op = 1; !stop.load(); ++op) {
        for (uint64_t& id : ids) id = IdOfRank(zipf->Next());
        PsCallOptions call;
        call.step = op;
        absl::Status s = clients[t]->Pull("item", ids, absl::MakeSpan(rows), call);
        if (s.ok() && op % kPushEvery == 0) s = clients[t]->Push("item", ids, grads, op);
        if (!s.ok()) {
          errors[t] = s;
          return;
        }
        if (measuring.load()) measured_keys.fetch_add(kLookupKeys);
      }
    });
  }
  auto finish = [&]() -> absl::Status {
    stop = true;
    for (std::thread& th : threads) th.join();
    for (const absl::Status& e : errors) EMBER_RETURN_IF_ERROR(e);
    return absl::OkStatus();
  };
  // Warm up until the hot set is published (and, replicated, applied by the client).
  absl::SleepFor(absl::Seconds(2));
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (absl::Now() < give_up) {
    std::shared_ptr<const HotSetView> view = clients[0]->hot_set();
    if (view != nullptr && view->version() >= 1 && (!replicated || view->replicated())) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  absl::SleepFor(absl::Seconds(1));  // replicas filled, caches warm
  absl::StatusOr<std::vector<ShardLoad>> before = cluster.Load();
  if (!before.ok()) {
    finish().IgnoreError();
    return before.status();
  }
  const absl::Time start = absl::Now();
  measuring = true;
  absl::SleepFor(absl::Seconds(5));
  measuring = false;
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  absl::StatusOr<std::vector<ShardLoad>> after = cluster.Load();
  EMBER_RETURN_IF_ERROR(finish());
  EMBER_RETURN_IF_ERROR(after.status());
  LookupRun run;
  run.load_over_mean = LoadOverMean(*before, *after);
  run.max_over_mean = MaxOverMean(*before, *after);
  run.keys_per_sec = measured_keys.load() / seconds;
  uint64_t pulled = 0, replica = 0;
  for (size_t i = 0; i < after->size(); ++i) {
    pulled += (*after)[i].pulled_keys - (*before)[i].pulled_keys;
    replica += (*after)[i].replica_pulled_keys - (*before)[i].replica_pulled_keys;
  }
  run.replica_share = pulled + replica > 0 ? static_cast<double>(replica) / (pulled + replica) : 0;
  Say(absl::StrFormat("lookup zipf %.1f %s: load max/mean %.3f, %.0f keys/s, %.1f%% from replicas",
                      zipf_s,
                      !replicated       ? "plain"
                      : refresh_ms == 0 ? "replicated (sync)"
                                        : "replicated (periodic)",
                      run.max_over_mean, run.keys_per_sec, 100 * run.replica_share));
  return run;
}

// ---------------------------------------------------------------- 2./3. Training

struct TrainRun {
  std::string result;  // result.json
  double load_max_over_mean = 0;
  double replica_share = 0;              // of pulled keys, answered by replicas
  std::map<std::string, uint64_t> rows;  // stored rows per table
};

absl::StatusOr<TrainRun> RunTraining(const std::string& bin, const std::string& dir, int shards,
                                     const std::vector<std::string>& coordinator_flags,
                                     const std::string& config, const std::string& data,
                                     const std::vector<std::string>& worker_flags) {
  SkewCluster cluster(bin, dir);
  EMBER_RETURN_IF_ERROR(cluster.Start(shards, coordinator_flags));
  TrainRun run;
  EMBER_ASSIGN_OR_RETURN(run.result, cluster.Train(config, data, 2, worker_flags));
  EMBER_ASSIGN_OR_RETURN(std::vector<ShardLoad> load, cluster.Load());
  run.load_max_over_mean = MaxOverMean({}, load);
  uint64_t pulled = 0, replica = 0;
  for (const ShardLoad& l : load) {
    pulled += l.pulled_keys;
    replica += l.replica_pulled_keys;
  }
  run.replica_share = pulled + replica > 0 ? static_cast<double>(replica) / (pulled + replica) : 0;
  EMBER_ASSIGN_OR_RETURN(run.rows, cluster.RowsPerTable());
  return run;
}

absl::StatusOr<std::string> Dataset(const std::string& bin, const std::string& scratch,
                                    const BenchOptions& options, double zipf_s) {
  const std::string data = absl::StrFormat("%s/data-%d-s%d-zipf%.1f", scratch,
                                           options.train_examples, options.seed, zipf_s);
  if (!std::filesystem::exists(data + "/oracle.json")) {
    Say("generating " + data);
    EMBER_RETURN_IF_ERROR(RunCommand(absl::StrCat(
        bin, "/ember-datagen --out=", data, " --train_examples=", options.train_examples,
        " --seed=", options.seed, " --zipf=", zipf_s, " > /dev/null")));
  }
  return data;
}

// Writes `text` to <scratch>/<name>.pbtxt and returns the path.
std::string WriteConfig(const std::string& scratch, const std::string& name,
                        const std::string& text) {
  const std::string path = absl::StrCat(scratch, "/", name, ".pbtxt");
  std::ofstream(path) << text;
  return path;
}

// Bytes of one stored row of the quickstart tables: RowMeta (24) + dim 16 embedding +
// 16 Adagrad accumulators, float32.
constexpr double kRowBytes = 24 + 4 * (16 + 16);

absl::StatusOr<Figures> RunSkewSuite(const BenchOptions& options) {
  const std::string bin = cluster::ExecutableDir();
  if (bin.empty()) return absl::InternalError("cannot read /proc/self/exe");
  const std::string source = EMBER_SOURCE_DIR;
  std::string scratch = options.dir.empty() ? "/tmp/ember-bench-skew" : options.dir;
  std::filesystem::create_directories(scratch);
  Figures figures;
  figures.AddInt("shards", kShards);
  figures.AddInt("train_examples", options.train_examples);
  figures.AddInt("hardware_threads", std::thread::hardware_concurrency());

  // 1. Lookup load.
  GroupedBarChart load_chart("Per-shard load / mean, lookup traffic (4 shards)",
                             "keys served / mean over shards");
  load_chart.SetSeries({"plain", "replicated, sync refresh", "replicated, 100 ms refresh"});
  load_chart.SetReferenceLine(1.25, "target max 1.25");
  bool load_met = true;
  for (double s : kZipfs) {
    const std::string z = ZipfName(s);
    EMBER_ASSIGN_OR_RETURN(
        LookupRun plain, RunLookupLoad(bin, scratch + "/lookup-plain", s, false, 0, options.seed));
    EMBER_ASSIGN_OR_RETURN(LookupRun repl, RunLookupLoad(bin, scratch + "/lookup-replicated", s,
                                                         true, 0, options.seed));
    // Periodic refresh (100 ms): pushes do not wait for the copies.
    EMBER_ASSIGN_OR_RETURN(LookupRun periodic, RunLookupLoad(bin, scratch + "/lookup-periodic", s,
                                                             true, 100, options.seed));
    figures.AddNumber(absl::StrCat("lookup_", z, "_load_max_over_mean_periodic"),
                      periodic.max_over_mean);
    figures.AddNumber(absl::StrCat("lookup_", z, "_keys_per_sec_periodic"), periodic.keys_per_sec);
    figures.AddNumber(absl::StrCat("lookup_", z, "_speed_periodic_vs_plain"),
                      periodic.keys_per_sec / plain.keys_per_sec);
    figures.AddNumber(absl::StrCat("lookup_", z, "_load_max_over_mean_plain"), plain.max_over_mean);
    figures.AddNumber(absl::StrCat("lookup_", z, "_load_max_over_mean_replicated"),
                      repl.max_over_mean);
    figures.AddNumber(absl::StrCat("lookup_", z, "_keys_per_sec_plain"), plain.keys_per_sec);
    figures.AddNumber(absl::StrCat("lookup_", z, "_keys_per_sec_replicated"), repl.keys_per_sec);
    figures.AddNumber(absl::StrCat("lookup_", z, "_speed_replicated_vs_plain"),
                      repl.keys_per_sec / plain.keys_per_sec);
    figures.AddNumber(absl::StrCat("lookup_", z, "_replica_share"), repl.replica_share);
    load_met = load_met && repl.max_over_mean <= 1.25;
    if (s == 1.1) {
      figures.AddNumber("load_max_over_mean_plain", plain.max_over_mean);
      figures.AddNumber("load_max_over_mean_replicated", repl.max_over_mean);
    }
    for (int i = 0; i < kShards; ++i) {
      load_chart.AddGroup(
          absl::StrFormat("%.1f: s%d", s, i),
          {plain.load_over_mean[i], repl.load_over_mean[i], periodic.load_over_mean[i]});
    }
  }
  figures.AddBool("load_target_met", load_met);

  // 2. Training: plain; replication on with the default hot threshold (--hot_min_share
  // 0.01: with deduplicated batches no key of this job reaches it, so nothing is
  // replicated); and forced, with a threshold that makes each table's top 64 keys hot.
  const std::string quickstart = source + "/configs/quickstart.pbtxt";
  bool speed_kept = true, auc_kept = true;
  for (double s : kZipfs) {
    const std::string z = ZipfName(s);
    EMBER_ASSIGN_OR_RETURN(std::string data, Dataset(bin, scratch, options, s));
    const std::vector<std::string> plain_flags = {"--hot_publish_interval_ms=250"};
    const std::vector<std::string> default_flags = {"--hot_publish_interval_ms=250",
                                                    "--hot_replicas=3"};
    std::vector<std::string> forced_flags = kTrainHotFlags;
    forced_flags.push_back("--hot_replicas=3");
    EMBER_ASSIGN_OR_RETURN(TrainRun plain, RunTraining(bin, scratch + "/train", kShards,
                                                       plain_flags, quickstart, data, {}));
    EMBER_ASSIGN_OR_RETURN(TrainRun repl, RunTraining(bin, scratch + "/train", kShards,
                                                      default_flags, quickstart, data, {}));
    EMBER_ASSIGN_OR_RETURN(TrainRun forced, RunTraining(bin, scratch + "/train", kShards,
                                                        forced_flags, quickstart, data, {}));
    const double auc_plain = JsonNumber(plain.result, "test_auc");
    const double eps_plain = JsonNumber(plain.result, "examples_per_sec");
    figures.AddNumber(absl::StrCat("train_", z, "_auc_plain"), auc_plain);
    figures.AddNumber(absl::StrCat("train_", z, "_examples_per_sec_plain"), eps_plain);
    figures.AddNumber(absl::StrCat("train_", z, "_load_max_over_mean_plain"),
                      plain.load_max_over_mean);
    for (const auto& [name, run] : {std::pair<std::string, const TrainRun*>{"replicated", &repl},
                                    std::pair<std::string, const TrainRun*>{"forced", &forced}}) {
      const double auc = JsonNumber(run->result, "test_auc");
      const double eps = JsonNumber(run->result, "examples_per_sec");
      const std::string p = absl::StrCat("train_", z, "_");
      figures.AddNumber(p + "auc_" + name, auc);
      figures.AddNumber(p + "auc_change_" + name, auc - auc_plain);
      figures.AddNumber(p + "examples_per_sec_" + name, eps);
      figures.AddNumber(p + "speed_" + name + "_vs_plain", eps / eps_plain);
      figures.AddNumber(p + "load_max_over_mean_" + name, run->load_max_over_mean);
      figures.AddNumber(p + "replica_share_" + name, run->replica_share);
      // BSP: replication must not change a bit of the model.
      figures.AddBool(p + "same_model_" + name,
                      !JsonString(plain.result, "model_checksum").empty() &&
                          JsonString(plain.result, "model_checksum") ==
                              JsonString(run->result, "model_checksum"));
      Say(
          absl::StrFormat("train zipf %.1f %s: AUC %.4f -> %.4f, %.0f -> %.0f examples/s, load "
                          "max/mean %.3f -> %.3f, %.1f%% of pulled keys from replicas",
                          s, name, auc_plain, auc, eps_plain, eps, plain.load_max_over_mean,
                          run->load_max_over_mean, 100 * run->replica_share));
      if (name == "replicated") {
        speed_kept = speed_kept && eps >= 0.95 * eps_plain;
        auc_kept = auc_kept && auc >= auc_plain - 0.001;
        if (s == 1.1) figures.AddNumber("auc_change_replicated", auc - auc_plain);
      }
    }
  }
  figures.AddBool("train_speed_replicated_kept_within_5pct", speed_kept);
  figures.AddBool("train_auc_replicated_kept_within_0.001", auc_kept);

  // 3. Cold IDs.
  EMBER_ASSIGN_OR_RETURN(std::string data, Dataset(bin, scratch, options, 1.1));
  const std::string base = ReadFile(quickstart);
  const std::string adagrad = "initial_accumulator: 0.000001 }";
  struct Variant {
    std::string name;
    std::string config;
    std::vector<std::string> flags;
  };
  const std::vector<Variant> variants = {
      {"plain", base, {}},
      {"freq_lr",
       absl::StrReplaceAll(base, {{adagrad,
                                   "initial_accumulator: 0.000001 "
                                   "freq_power: 0.5 }"}}),
       {}},
      // configs/quickstart.pbtxt names the cold features (user_id, item_id), all off.
      {"loss_weight", base, {"--cold_loss_weight=2"}},
      {"resample", base, {"--cold_resample_fraction=0.1"}},
      {"admission",
       absl::StrReplaceAll(
           base,
           {{R"(name: "user" dim: 16)", R"(name: "user" dim: 16 admission { min_count: 2 })"},
            {R"(name: "item" dim: 16)", R"(name: "item" dim: 16 admission { min_count: 2 })"}}),
       {}},
      {"eviction",
       absl::StrReplaceAll(
           base,
           {{R"(name: "user" dim: 16)", R"(name: "user" dim: 16 eviction { ttl_steps: 200 })"},
            {R"(name: "item" dim: 16)", R"(name: "item" dim: 16 eviction { ttl_steps: 200 })"}}),
       {"--checkpoint_every_steps=100"}},
  };
  GroupedBarChart auc_chart("Test AUC by frequency bucket (Zipf 1.1, 2 workers, 2 shards)",
                            "test AUC");
  std::vector<std::string> names;
  for (const Variant& v : variants) names.push_back(v.name);
  auc_chart.SetSeries(names);
  std::vector<std::vector<double>> by_bucket(4);
  std::map<std::string, uint64_t> plain_rows;
  double plain_auc = 0, plain_cold = 0, plain_cold_users = 0;
  for (const Variant& v : variants) {
    const std::string config = WriteConfig(scratch, "cold-" + v.name, v.config);
    EMBER_ASSIGN_OR_RETURN(TrainRun run,
                           RunTraining(bin, scratch + "/cold", 2, {}, config, data, v.flags));
    const std::string& r = run.result;
    const std::string p = absl::StrCat("cold_", v.name, "_");
    const double auc = JsonNumber(r, "test_auc");
    figures.AddNumber(p + "auc", auc);
    figures.AddNumber(p + "auc_hot", JsonNumber(r, "auc_hot"));
    figures.AddNumber(p + "auc_warm", JsonNumber(r, "auc_warm"));
    figures.AddNumber(p + "auc_cold", JsonNumber(r, "auc_cold"));
    figures.AddNumber(p + "auc_cold_users", JsonNumber(r, "auc_cold_users"));
    figures.AddNumber(p + "examples_per_sec", JsonNumber(r, "examples_per_sec"));
    uint64_t total_rows = 0;
    for (const auto& [table, rows] : run.rows) {
      figures.AddInt(absl::StrCat(p, "rows_", table), static_cast<int64_t>(rows));
      total_rows += rows;
    }
    figures.AddNumber(p + "stored_mb", total_rows * kRowBytes / 1e6);
    by_bucket[0].push_back(JsonNumber(r, "auc_hot"));
    by_bucket[1].push_back(JsonNumber(r, "auc_warm"));
    by_bucket[2].push_back(JsonNumber(r, "auc_cold"));
    by_bucket[3].push_back(JsonNumber(r, "auc_cold_users"));
    if (v.name == "plain") {
      plain_rows = run.rows;
      plain_auc = auc;
      plain_cold = JsonNumber(r, "auc_cold");
      plain_cold_users = JsonNumber(r, "auc_cold_users");
    } else {
      figures.AddNumber(p + "auc_change", auc - plain_auc);
      figures.AddNumber(p + "auc_cold_change", JsonNumber(r, "auc_cold") - plain_cold);
      figures.AddNumber(p + "auc_cold_users_change",
                        JsonNumber(r, "auc_cold_users") - plain_cold_users);
    }
    if (v.name == "admission" || v.name == "eviction") {
      for (const std::string table : {"user", "item"}) {
        const double before = static_cast<double>(plain_rows[table]);
        figures.AddNumber(absl::StrCat(p, table, "_memory_saved_fraction"),
                          before > 0 ? 1 - run.rows[table] / before : 0);
      }
    }
    Say(
        absl::StrFormat("cold %s: AUC %.4f (hot %.4f warm %.4f cold %.4f cold users %.4f), "
                        "%d stored rows",
                        v.name, auc, JsonNumber(r, "auc_hot"), JsonNumber(r, "auc_warm"),
                        JsonNumber(r, "auc_cold"), JsonNumber(r, "auc_cold_users"), total_rows));
  }
  const char* buckets[] = {"hot items", "warm items", "cold items", "cold-start users"};
  for (int b = 0; b < 4; ++b) auc_chart.AddGroup(buckets[b], by_bucket[b]);
  double lowest = 1;
  for (const auto& row : by_bucket) {
    for (double v : row) {
      if (std::isfinite(v)) lowest = std::min(lowest, v);
    }
  }
  auc_chart.SetYMin(std::floor(lowest * 20) / 20);

  const std::string plots = scratch + "/plots";
  EMBER_RETURN_IF_ERROR(load_chart.WriteSvg(plots + "/skew_load.svg"));
  EMBER_RETURN_IF_ERROR(auc_chart.WriteSvg(plots + "/skew_auc_buckets.svg"));
  Say("plots: " + plots + "/skew_load.svg, " + plots + "/skew_auc_buckets.svg");
  return figures;
}

}  // namespace

EMBER_BENCH_SUITE(skew,
                  "hot-key replication (load max/mean, examples/s, AUC at Zipf 0.9/1.1/1.3 on 4 "
                  "shards) and cold-ID handling (AUC by bucket, memory) against plain runs",
                  RunSkewSuite);

}  // namespace ember::bench
