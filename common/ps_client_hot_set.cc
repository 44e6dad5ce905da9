// Copyright 2026 The Ember Authors.

#include "common/ps_client_hot_set.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "grpcpp/client_context.h"

namespace ember {
namespace {

// How long a cancelled background fetch gets to deliver its callback.
constexpr absl::Duration kCancelGrace = absl::Seconds(5);

}  // namespace

struct HotSetCache::Fetch {
  grpc::ClientContext context;
  v1::GetHotSetRequest request;
  v1::GetHotSetResponse response;
  absl::Time deadline;
  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  grpc::Status status;  // written by the callback before `done`

  bool Done() {
    absl::MutexLock lock(&mu);
    return done;
  }
  // Waits until the callback ran or `deadline` passes; returns whether it ran.
  bool AwaitDone(absl::Time until) {
    absl::MutexLock lock(&mu);
    auto ran = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return done; };
    return mu.AwaitWithDeadline(absl::Condition(&ran), until);
  }
};

HotSetCache::HotSetCache(v1::CoordinatorService::Stub* coordinator, absl::Duration refresh_interval,
                         absl::Duration rpc_timeout)
    : coordinator_(coordinator),
      refresh_interval_(refresh_interval),
      rpc_timeout_(rpc_timeout),
      view_(std::make_shared<const HotSetView>()) {}

HotSetCache::~HotSetCache() {
  std::unique_ptr<Fetch> fetch;
  {
    absl::MutexLock lock(&mu_);
    fetch = std::move(fetch_);
  }
  if (fetch == nullptr || fetch->AwaitDone(fetch->deadline + absl::Seconds(1))) return;
  fetch->context.TryCancel();
  // A callback that still does not come may write into the fetch: leak it.
  if (!fetch->AwaitDone(absl::Now() + kCancelGrace)) fetch.release();
}

std::unique_ptr<HotSetCache::Fetch> HotSetCache::TakeFinished() {
  if (fetch_ == nullptr || !fetch_->Done()) return nullptr;
  // A failed fetch (coordinator down, or one without GetHotSet) keeps the view; the
  // next one is due after refresh_interval anyway.
  if (fetch_->status.ok()) InstallLocked(fetch_->response.hot_set());
  return std::move(fetch_);
}

void HotSetCache::StartFetch(absl::Time now) {
  last_start_ = now;
  fetch_ = std::make_unique<Fetch>();
  Fetch* f = fetch_.get();
  f->deadline = now + rpc_timeout_;
  f->context.set_deadline(absl::ToChronoTime(f->deadline));
  f->request.set_known_version(view_->version());
  // The callback owns nothing and touches only the fetch; its unlock is its last access.
  coordinator_->async()->GetHotSet(&f->context, &f->request, &f->response,
                                   [f](grpc::Status status) {
                                     f->status = std::move(status);
                                     absl::MutexLock lock(&f->mu);
                                     f->done = true;
                                   });
}

std::shared_ptr<const HotSetView> HotSetCache::Current() {
  std::unique_ptr<Fetch> finished;  // freed after the lock is dropped
  absl::MutexLock lock(&mu_);
  finished = TakeFinished();
  if (coordinator_ != nullptr && refresh_interval_ > absl::ZeroDuration() && fetch_ == nullptr) {
    const absl::Time now = absl::Now();
    if (now - last_start_ >= refresh_interval_) StartFetch(now);
  }
  return view_;
}

void HotSetCache::Kick() {
  std::unique_ptr<Fetch> finished;
  absl::MutexLock lock(&mu_);
  finished = TakeFinished();
  if (coordinator_ != nullptr && refresh_interval_ > absl::ZeroDuration() && fetch_ == nullptr) {
    StartFetch(absl::Now());
  }
}

absl::Status HotSetCache::Refresh(absl::Time deadline) {
  if (coordinator_ == nullptr) {
    return absl::FailedPreconditionError("PsClient: no coordinator_address, so no hot set");
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(std::min(deadline, absl::Now() + rpc_timeout_)));
  v1::GetHotSetRequest request;
  {
    absl::MutexLock lock(&mu_);
    request.set_known_version(view_->version());
  }
  v1::GetHotSetResponse response;
  const absl::Status s =
      FromGrpcStatus(coordinator_->GetHotSet(&context, request, &response), &context);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("coordinator GetHotSet: ", s.message()));
  }
  Install(response.hot_set());
  return absl::OkStatus();
}

bool HotSetCache::Install(const v1::HotSet& hot_set) {
  absl::MutexLock lock(&mu_);
  return InstallLocked(hot_set);
}

bool HotSetCache::InstallLocked(const v1::HotSet& hot_set) {
  if (hot_set.version() <= view_->version()) return false;
  view_ = std::make_shared<const HotSetView>(hot_set);
  return true;
}

}  // namespace ember
