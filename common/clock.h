// Copyright 2026 The Ember Authors.
//
// Injectable time. Code that needs the time takes a Clock*, so tests can use FakeClock
// and never sleep to order events.

#ifndef EMBER_COMMON_CLOCK_H_
#define EMBER_COMMON_CLOCK_H_

#include <atomic>
#include <cstdint>

namespace ember {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time in microseconds since an arbitrary origin. Thread-safe.
  virtual int64_t NowMicros() const = 0;
  // Wall-clock time in microseconds since the Unix epoch. Thread-safe.
  virtual int64_t WallMicros() const = 0;

  // The process-wide real clock. Never null; never destroyed.
  static Clock* Real();
};

// A clock that moves only when told to. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_micros = 1'000'000) : now_(start_micros) {}
  int64_t NowMicros() const override { return now_.load(std::memory_order_acquire); }
  int64_t WallMicros() const override { return NowMicros(); }
  void Advance(int64_t micros) { now_.fetch_add(micros, std::memory_order_acq_rel); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace ember

#endif  // EMBER_COMMON_CLOCK_H_
