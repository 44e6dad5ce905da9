// Copyright 2026 The Ember Authors.

#include "server/coordinator/hot_set_publisher.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/metric_families.h"

namespace ember {
namespace {

// A rate a shard reported, or 0 if it is not a usable number.
double Sane(double rate) { return std::isfinite(rate) && rate > 0 ? rate : 0; }

// The hot ids of every table of `set`, each list ascending.
std::map<std::string, std::vector<uint64_t>> KeySets(const v1::HotSet& set) {
  std::map<std::string, std::vector<uint64_t>> out;
  for (const v1::HotKeyTable& table : set.tables()) {
    std::vector<uint64_t>& ids = out[table.table()];
    for (const v1::HotKey& key : table.keys()) ids.push_back(key.id());
    std::sort(ids.begin(), ids.end());
  }
  return out;
}

bool SameHolders(const v1::HotSet& a, const v1::HotSet& b) {
  if (a.holders_size() != b.holders_size()) return false;
  for (int i = 0; i < a.holders_size(); ++i) {
    if (a.holders(i).shard_id() != b.holders(i).shard_id() ||
        a.holders(i).address() != b.holders(i).address() ||
        a.holders(i).incarnation() != b.holders(i).incarnation()) {
      return false;
    }
  }
  return true;
}

bool SameSettings(const v1::HotSet& a, const v1::HotSet& b) {
  return a.replicas() == b.replicas() && a.refresh_interval_ms() == b.refresh_interval_ms() &&
         a.max_staleness_ms() == b.max_staleness_ms() &&
         a.max_staleness_steps() == b.max_staleness_steps();
}

}  // namespace

absl::Status ValidateHotSetOptions(const HotSetOptions& o) {
  if (!(o.min_share > 0 && o.min_share <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--hot_min_share must be in (0, 1], not ", o.min_share));
  }
  if (o.publish_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--hot_publish_interval_ms must be >= 1");
  }
  if (o.keys_per_table > 1'000'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--hot_keys_per_table must be <= 1000000, not ", o.keys_per_table));
  }
  if (o.replicas > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--hot_replicas must be <= 1024, not ", o.replicas));
  }
  if (o.refresh_interval_ms == 0 && (o.max_staleness_ms > 0 || o.max_staleness_steps > 0)) {
    return absl::InvalidArgumentError(
        "--hot_max_staleness_ms and --hot_max_staleness_steps apply to periodic refresh only: "
        "give --hot_refresh_ms > 0 too (0 = synchronous, exact replicas)");
  }
  if (o.refresh_interval_ms > 0 && o.max_staleness_ms > 0 &&
      o.max_staleness_ms < o.refresh_interval_ms) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--hot_max_staleness_ms (", o.max_staleness_ms, ") is below --hot_refresh_ms (",
        o.refresh_interval_ms, "): every replica would be refused between two refreshes"));
  }
  return absl::OkStatus();
}

class HotSetPublisher::Collector final : public prometheus::Collectable {
 public:
  explicit Collector(HotSetPublisher* publisher) : publisher_(publisher) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<std::pair<std::string, double>> keys;
    uint64_t version = 0;
    {
      absl::MutexLock lock(&publisher_->mu_);
      version = publisher_->current_.version();
      for (const v1::HotKeyTable& table : publisher_->current_.tables()) {
        keys.emplace_back(table.table(), table.keys_size());
      }
    }
    std::vector<prometheus::MetricFamily> out;
    FamilyWriter w(&out);
    w.Gauge("ember_hot_set_version", "Version of the published hot set (0: none).",
            static_cast<double>(version));
    w.Labelled("ember_hot_keys", "Hot keys per table in the published hot set.",
               prometheus::MetricType::Gauge, "table", keys);
    return out;
  }

 private:
  HotSetPublisher* const publisher_;
};

HotSetPublisher::HotSetPublisher(const HotSetOptions& options) : options_(options) {}

HotSetPublisher::~HotSetPublisher() { Stop(); }

absl::Status HotSetPublisher::Start(ShardsCallback shards) {
  if (thread_.joinable() || stop_.HasBeenNotified()) {
    return absl::FailedPreconditionError("hot set publisher already started");
  }
  if (!shards) return absl::InvalidArgumentError("hot set publisher: missing shards callback");
  if (absl::Status s = ValidateHotSetOptions(options_); !s.ok()) return s;
  if (options_.keys_per_table == 0) return absl::OkStatus();
  shards_ = std::move(shards);
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void HotSetPublisher::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void HotSetPublisher::Loop() {
  do {
    Compute(shards_());
  } while (!stop_.WaitForNotificationWithTimeout(options_.publish_interval));
}

void HotSetPublisher::Report(uint32_t shard_id, uint64_t incarnation,
                             const v1::HotKeyReport& report, uint64_t applied_version) {
  if (options_.keys_per_table == 0) return;
  absl::MutexLock lock(&mu_);
  reports_[shard_id] = report;
  if (incarnation != 0) incarnations_[shard_id] = incarnation;
  SeenVersion(applied_version);
}

void HotSetPublisher::ShardRegistered(uint32_t shard_id, uint64_t incarnation) {
  if (options_.keys_per_table == 0 || incarnation == 0) return;
  absl::MutexLock lock(&mu_);
  incarnations_[shard_id] = incarnation;
}

void HotSetPublisher::SeenVersion(uint64_t version) {
  if (version > current_.version()) floor_ = std::max(floor_, version);
}

uint64_t HotSetPublisher::version() const {
  absl::MutexLock lock(&mu_);
  return current_.version();
}

v1::HotSet HotSetPublisher::Get(uint64_t known_version) {
  absl::MutexLock lock(&mu_);
  SeenVersion(known_version);
  if (known_version != current_.version()) return current_;
  v1::HotSet out = current_;
  out.clear_tables();
  out.clear_holders();
  return out;
}

bool HotSetPublisher::Compute(const std::vector<v1::ShardInfo>& shards) {
  if (options_.keys_per_table == 0) return false;
  v1::HotSet next;
  next.set_replicas(options_.replicas);
  next.set_refresh_interval_ms(options_.refresh_interval_ms);
  next.set_max_staleness_ms(options_.max_staleness_ms);
  next.set_max_staleness_steps(options_.max_staleness_steps);
  std::vector<const v1::ShardInfo*> alive;
  for (const v1::ShardInfo& shard : shards) {
    if (shard.state() == v1::ShardInfo::ALIVE) alive.push_back(&shard);
  }
  std::sort(alive.begin(), alive.end(),
            [](const v1::ShardInfo* a, const v1::ShardInfo* b) {
              return a->shard_id() < b->shard_id();
            });
  absl::flat_hash_set<uint32_t> alive_ids;
  for (const v1::ShardInfo* shard : alive) alive_ids.insert(shard->shard_id());

  std::string log;
  {
    absl::MutexLock lock(&mu_);
    for (const v1::ShardInfo* shard : alive) {
      v1::HotSetHolder* holder = next.add_holders();
      holder->set_shard_id(shard->shard_id());
      holder->set_address(shard->address());
      auto incarnation = incarnations_.find(shard->shard_id());
      if (incarnation != incarnations_.end()) holder->set_incarnation(incarnation->second);
    }
    for (auto it = reports_.begin(); it != reports_.end();) {
      it = alive_ids.contains(it->first) ? std::next(it) : reports_.erase(it);
    }
    double total = 0;
    std::map<std::string, absl::flat_hash_map<uint64_t, double>> rates;  // ascending names
    for (const auto& [shard_id, report] : reports_) {
      total += Sane(report.total_rate());
      for (const v1::HotKeyTable& table : report.tables()) {
        if (table.table().empty()) continue;
        absl::flat_hash_map<uint64_t, double>& ids = rates[table.table()];
        for (const v1::HotKey& key : table.keys()) ids[key.id()] += Sane(key.rate());
      }
    }
    next.set_total_rate(total);
    const std::map<std::string, std::vector<uint64_t>> was = KeySets(current_);
    for (const auto& [name, ids] : rates) {
      if (total <= 0) break;
      auto hot_before = was.find(name);
      std::vector<v1::HotKey> keys;
      for (const auto& [id, rate] : ids) {
        const bool was_hot = hot_before != was.end() &&
                             std::binary_search(hot_before->second.begin(),
                                                hot_before->second.end(), id);
        const double share = rate / total;
        if (rate > 0 && share >= (was_hot ? options_.min_share / 2 : options_.min_share)) {
          v1::HotKey key;
          key.set_id(id);
          key.set_rate(rate);
          keys.push_back(std::move(key));
        }
      }
      if (keys.empty()) continue;
      std::sort(keys.begin(), keys.end(), [](const v1::HotKey& a, const v1::HotKey& b) {
        return a.rate() != b.rate() ? a.rate() > b.rate() : a.id() < b.id();
      });
      if (keys.size() > options_.keys_per_table) keys.resize(options_.keys_per_table);
      v1::HotKeyTable* table = next.add_tables();
      table->set_table(name);
      for (v1::HotKey& key : keys) *table->add_keys() = std::move(key);
    }

    const bool changed =
        current_.version() == 0
            ? next.holders_size() > 0 || next.tables_size() > 0 || floor_ > 0
            : KeySets(next) != was || !SameHolders(next, current_) ||
                  !SameSettings(next, current_) || floor_ > current_.version();
    if (!changed) {
      next.set_version(current_.version());
      current_ = std::move(next);
      return false;
    }
    next.set_version(std::max(current_.version(), floor_) + 1);
    log = absl::StrCat("hot set version ", next.version(), ":");
    if (next.tables_size() == 0) absl::StrAppend(&log, " no hot keys");
    for (const v1::HotKeyTable& table : next.tables()) {
      absl::StrAppend(&log, " ", table.table(), "=", table.keys_size(),
                      table.keys_size() == 1 ? " key" : " keys");
    }
    absl::StrAppend(&log, " (", next.holders_size(),
                    next.holders_size() == 1 ? " holder" : " holders", ", replicas ",
                    next.replicas(),
                    ", cluster load ", static_cast<int64_t>(std::llround(total)), " keys/s)");
    current_ = std::move(next);
  }
  EMBER_LOG(INFO) << log;
  return true;
}

std::shared_ptr<prometheus::Collectable> HotSetPublisher::MetricsCollector() {
  return std::make_shared<Collector>(this);
}

}  // namespace ember
