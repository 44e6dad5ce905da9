// Copyright 2026 The Ember Authors.
//
// HotSetCache: the hot set (proto/ember/v1/hotkeys.proto) as a PS client knows it,
// fetched from the coordinator with CoordinatorService.GetHotSet. PsClient reads it on
// every Pull to route hot keys to replica holders; kept apart so the data path never
// waits for the coordinator:
//  * Current() returns the newest view at once and, when `refresh_interval` has passed
//    since the last fetch started, starts one in the background (one at most in
//    flight). Its answer is taken by a later Current() (or the destructor).
//  * Refresh() fetches synchronously (PsClient::Create, PsClient::RefreshHotSet).
// Only newer versions replace the view: GetHotSet omits the lists when the caller's
// version is current, and a restarted coordinator publishes above the versions its
// shards and clients report.
//
//   HotSetCache cache(coordinator_stub.get(), absl::Seconds(1), absl::Seconds(2));
//   std::shared_ptr<const HotSetView> view = cache.Current();
//   if (view->IsHot("item", id)) ...
//
// Lifetimes (as PsClient's rounds, ps_client.cc): a background fetch's ClientContext,
// request and response are owned by the cache and freed only by a caller's thread after
// its callback ran; the callback only stores its status and sets a flag. The
// destructor waits for a fetch in flight (bounded: the fetch has a deadline; then it is
// cancelled, and leaked if its callback still does not come).
//
// Thread-safety: all methods may be called concurrently.

#ifndef EMBER_COMMON_PS_CLIENT_HOT_SET_H_
#define EMBER_COMMON_PS_CLIENT_HOT_SET_H_

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/hot_set.h"
#include "ember/v1/coordinator.grpc.pb.h"

namespace ember {

class HotSetCache {
 public:
  // `coordinator` (not owned, may be null: the view then stays empty) must outlive the
  // cache. refresh_interval 0: Current() never fetches (only Refresh and Kick with
  // force do). Every fetch has the deadline `rpc_timeout`.
  HotSetCache(v1::CoordinatorService::Stub* coordinator, absl::Duration refresh_interval,
              absl::Duration rpc_timeout);
  ~HotSetCache();

  HotSetCache(const HotSetCache&) = delete;
  HotSetCache& operator=(const HotSetCache&) = delete;

  // The newest view (never null; version 0 when nothing is known). Takes the answer
  // of a finished background fetch and starts a new one when due. Never blocks on IO.
  std::shared_ptr<const HotSetView> Current();

  // Starts a background fetch now unless one is in flight or refresh_interval is 0
  // (e.g. after the cluster map changed). Never blocks on IO.
  void Kick();

  // Fetches the hot set and waits for it (by `deadline` at the latest). The
  // coordinator's error otherwise (the view is kept); FAILED_PRECONDITION without a
  // coordinator.
  absl::Status Refresh(absl::Time deadline);

  // Replaces the view with `hot_set` if its version is newer. Returns whether it did.
  bool Install(const v1::HotSet& hot_set);

 private:
  struct Fetch;

  // Takes a finished background fetch's answer; returns the fetch to free (outside
  // the lock), or null. REQUIRES: mu_ held.
  std::unique_ptr<Fetch> TakeFinished() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts a background fetch. REQUIRES: mu_ held, none in flight.
  void StartFetch(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool InstallLocked(const v1::HotSet& hot_set) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  v1::CoordinatorService::Stub* const coordinator_;
  const absl::Duration refresh_interval_;
  const absl::Duration rpc_timeout_;

  mutable absl::Mutex mu_;
  std::shared_ptr<const HotSetView> view_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Fetch> fetch_ ABSL_GUARDED_BY(mu_);  // in flight or not yet taken
  absl::Time last_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace ember

#endif  // EMBER_COMMON_PS_CLIENT_HOT_SET_H_
