// Copyright 2026 The Ember Authors.
//
// The one place where a rocksdb::Status becomes an absl::Status. Nothing else in Ember
// inspects RocksDB status codes, so the mapping below is the whole contract:
//
//   rocksdb                                      absl
//   OK                                           OK
//   NotFound                                     NOT_FOUND
//   Corruption                                   DATA_LOSS
//   InvalidArgument                              INVALID_ARGUMENT
//   IOError with subcode NoSpace or SpaceLimit   RESOURCE_EXHAUSTED
//   IOError (other), Incomplete, TimedOut,
//   Busy, TryAgain                               UNAVAILABLE
//   anything else                                INTERNAL
//
// Example:
//   EMBER_RETURN_IF_ERROR(FromRocksDb(db->Put(opts, key, value), "put row"));

#ifndef EMBER_SERVER_STORE_INTERNAL_ROCKSDB_STATUS_H_
#define EMBER_SERVER_STORE_INTERNAL_ROCKSDB_STATUS_H_

#include <string_view>

#include "absl/status/status.h"
#include "rocksdb/status.h"

namespace ember {

// Returns OK for an OK `s`; otherwise a status with the code above and the message
// "<context>: <s.ToString()>". Thread-safe, pure.
absl::Status FromRocksDb(const rocksdb::Status& s, std::string_view context);

}  // namespace ember

#endif  // EMBER_SERVER_STORE_INTERNAL_ROCKSDB_STATUS_H_
