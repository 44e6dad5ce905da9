// Copyright 2026 The Ember Authors.

#include "server/ps/watch_slots.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace ember {
namespace {

// A refused follower retries after this long (its own backoff may be longer).
constexpr absl::Duration kWatchRetryAfter = absl::Seconds(1);

}  // namespace

std::string PeerAddress(absl::string_view peer) {
  const size_t scheme = peer.find(':');
  if (scheme == absl::string_view::npos) return std::string(peer);
  absl::string_view rest = peer.substr(scheme + 1);
  const size_t port = rest.rfind(':');
  if (port == absl::string_view::npos || port == 0) return std::string(peer);
  return std::string(rest.substr(0, port));
}

WatchSlots::Slot::Slot(Slot&& other) noexcept
    : slots_(std::exchange(other.slots_, nullptr)), peer_(std::move(other.peer_)) {}

WatchSlots::Slot& WatchSlots::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    Release();
    slots_ = std::exchange(other.slots_, nullptr);
    peer_ = std::move(other.peer_);
  }
  return *this;
}

WatchSlots::Slot::~Slot() { Release(); }

void WatchSlots::Slot::Release() {
  if (slots_ != nullptr) std::exchange(slots_, nullptr)->Release(peer_);
}

absl::StatusOr<WatchSlots::Slot> WatchSlots::Take(absl::string_view peer) {
  std::string key(peer);
  absl::MutexLock lock(&mu_);
  int& mine = per_peer_[key];
  if (open_ >= limits_.max_watches || mine >= limits_.max_per_peer) {
    const bool all = open_ >= limits_.max_watches;
    if (mine == 0) per_peer_.erase(key);
    return OverloadedError(
        all ? absl::StrCat("shard ", shard_id_, " serves ", open_,
                           " update streams already (--max_watches=", limits_.max_watches, ")")
            : absl::StrCat("shard ", shard_id_, ": peer ", key, " has ", mine,
                           " update streams open already (--max_watches_per_peer=",
                           limits_.max_per_peer, ")"),
        kWatchRetryAfter);
  }
  ++mine;
  ++open_;
  return Slot(this, std::move(key));
}

void WatchSlots::Release(const std::string& peer) {
  absl::MutexLock lock(&mu_);
  --open_;
  auto it = per_peer_.find(peer);
  if (it != per_peer_.end() && --it->second <= 0) per_peer_.erase(it);
}

int WatchSlots::open() const {
  absl::MutexLock lock(&mu_);
  return open_;
}

int WatchSlots::open_for(absl::string_view peer) const {
  absl::MutexLock lock(&mu_);
  auto it = per_peer_.find(std::string(peer));
  return it == per_peer_.end() ? 0 : it->second;
}

}  // namespace ember
