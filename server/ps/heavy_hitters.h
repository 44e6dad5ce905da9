// Copyright 2026 The Ember Authors.
//
// HeavyHitters: the keys one PS shard serves most, per table (hotkeys.proto, step 1).
//
// A Space-Saving summary (Metwally et al.) of at most `capacity` counters whose counts
// decay exponentially with a half-life, so the summary follows the current load, not
// the load since the process started:
//
//  * Every recorded key adds weight w(t) = 2^((t - landmark) / half_life) ("forward
//    decay"): older weights are relatively smaller, and reading the counts at time
//    `now` divides by w(now). The weights grow with time; when they get large, every
//    counter is rescaled and the landmark moves (renormalisation), which changes no
//    estimate. Recording therefore never touches the counters of other keys.
//  * A key already counted adds to its counter. A new key takes a free counter, or
//    replaces the key with the smallest count c_min: its count becomes c_min + w and
//    its error c_min. For every key in the summary, count - error <= true decayed
//    count <= count; every key whose true decayed count exceeds c_min is in it; and
//    c_min <= total / capacity.
//  * A rate is lambda * decayed count with lambda = ln 2 / half_life: for a key served
//    at a steady r keys/s, the decayed count tends to r / lambda, so the rate tends
//    to r (after a few half-lives; it starts lower while the window fills).
//
// Sampling (options.sample_every = s > 1): each key occurrence is recorded with
// probability 1/s and weight s, so every estimate stays unbiased (E[weight] = 1 per
// occurrence) while recording touches the summary about 1/s as often. The positions
// are drawn by geometric skips over the batch, so unsampled keys cost nothing. The
// error bounds above then hold for the sampled stream; the sampling adds a variance
// of about (s - 1) * true count to each count, small for the heavy keys this serves.
// total (TotalRate) counts every key, sampled or not.
//
//   HeavyHitters hh({.capacity = 256, .half_life = absl::Seconds(10), .sample_every = 16});
//   hh.Record(ids, absl::Now());                 // every Pull
//   for (const v1::HotKey& key : hh.Top(16, absl::Now())) { ... }
//
// Thread-safety: all methods may be called concurrently (one mutex; sampling is done
// before it is taken).

#ifndef EMBER_SERVER_PS_HEAVY_HITTERS_H_
#define EMBER_SERVER_PS_HEAVY_HITTERS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "ember/v1/hotkeys.pb.h"

namespace ember {

struct HeavyHittersOptions {
  // Counters kept: keys tracked at once. 0 tracks no key (TotalRate still works).
  // Default: 256.
  size_t capacity = 256;
  // Half-life of the decay. Must be positive. Default: 10 s.
  absl::Duration half_life = absl::Seconds(10);
  // Record each key occurrence with probability 1/sample_every and weight
  // sample_every (see above); 1 records every occurrence. Must be >= 1. Default: 16
  // (recording then costs ~8 ns per pulled key instead of ~100 ns on a Zipf stream,
  // tests/server/ps/heavy_hitters_bench.cc; a key served 1000 times per half-life is
  // estimated within ~4% (one standard deviation)).
  uint32_t sample_every = 16;
};

class HeavyHitters {
 public:
  // REQUIRES: options.half_life > 0 and options.sample_every >= 1.
  explicit HeavyHitters(const HeavyHittersOptions& options = {});

  HeavyHitters(const HeavyHitters&) = delete;
  HeavyHitters& operator=(const HeavyHitters&) = delete;

  // Records one occurrence of each of `ids` (duplicates count as many times) at `now`.
  // Times need not increase: an older `now` just weighs less.
  void Record(absl::Span<const uint64_t> ids, absl::Time now);

  // Up to `n` keys with the highest decayed counts, by descending rate: `rate` is
  // lambda * count at `now` (keys/s) and `error` the same measure of the count's
  // Space-Saving overestimate (rate - error <= true rate <= rate).
  std::vector<v1::HotKey> Top(size_t n, absl::Time now) const;

  // Keys recorded per second (decayed like the rates), over every key.
  double TotalRate(absl::Time now) const;

  // Keys tracked now (<= capacity).
  size_t size() const;
  const HeavyHittersOptions& options() const { return options_; }

 private:
  struct Counter {
    uint64_t id = 0;
    double count = 0;  // in landmark units: divide by w(now) to read
    double error = 0;
  };

  // w(now) relative to the landmark, renormalising first if it would grow too large.
  double WeightAt(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // e^(-lambda (now - landmark)): converts stored counts to decayed counts at `now`.
  double DecayAt(absl::Time now) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Add(uint64_t id, double weight) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // heap_ is a min-heap of counter slots by count; pos_ follows every move.
  void SiftUp(size_t pos) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SiftDown(size_t pos) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double CountAt(size_t pos) const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return counters_[heap_[pos]].count;
  }
  void Place(size_t pos, uint32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    heap_[pos] = slot;
    pos_[slot] = static_cast<uint32_t>(pos);
  }

  const HeavyHittersOptions options_;
  const double lambda_;  // per second: ln 2 / half_life

  mutable absl::Mutex mu_;
  absl::Time landmark_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  double total_ ABSL_GUARDED_BY(mu_) = 0;  // every key, landmark units
  // Counters live in fixed slots (a key keeps its slot while tracked), so heap moves
  // touch only the small position arrays, never the hash index.
  std::vector<Counter> counters_ ABSL_GUARDED_BY(mu_);                  // slot -> counter
  std::vector<uint32_t> heap_ ABSL_GUARDED_BY(mu_);                     // heap of slots
  std::vector<uint32_t> pos_ ABSL_GUARDED_BY(mu_);                      // slot -> heap position
  absl::flat_hash_map<uint64_t, uint32_t> index_ ABSL_GUARDED_BY(mu_);  // id -> slot
};

}  // namespace ember

#endif  // EMBER_SERVER_PS_HEAVY_HITTERS_H_
