// Copyright 2026 The Ember Authors.
//
// Every RPC a test makes has a deadline (STYLE.md: every wait has one). SetDeadline is
// the one place that turns a timeout into a gRPC deadline:
//
//   grpc::ClientContext context;
//   SetDeadline(&context);                     // kDefaultCallDeadline (10 s)
//   SetDeadline(&context, absl::Seconds(30));  // a slow call (a checksum of a big shard)

#ifndef EMBER_TESTS_SUPPORT_DEADLINE_H_
#define EMBER_TESTS_SUPPORT_DEADLINE_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"

namespace ember {

inline constexpr absl::Duration kDefaultCallDeadline = absl::Seconds(10);

// Sets `context`'s deadline to `timeout` from now. REQUIRES: before the call starts.
inline void SetDeadline(grpc::ClientContext* context,
                        absl::Duration timeout = kDefaultCallDeadline) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

}  // namespace ember

#endif  // EMBER_TESTS_SUPPORT_DEADLINE_H_
