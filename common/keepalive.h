// Copyright 2026 The Ember Authors.
//
// HTTP/2 keepalive for Ember's own connections. A call waits for its answer on a TCP
// connection that can die without either side hearing of it: a one-way partition drops
// the peer's answer and then its FIN or RST, and the waiting side has nothing left to
// send, so TCP never notices (found by tests/tools/partition_test.sh's one-way cut: the
// coordinator's CheckpointShard call to the cut-off shard waited for its whole 10-minute
// deadline after the link was back, holding the job's recovery behind it). With
// keepalive the client pings every kKeepaliveTime while calls are in flight and closes
// the connection when a ping is not answered within kKeepaliveTimeout: the calls on it
// fail UNAVAILABLE, which every caller already retries or turns into a recovery.
//
//   grpc::ChannelArguments args;
//   SetClientKeepalive(&args);                 // every channel to a coordinator or shard
//   ...
//   grpc::ServerBuilder builder;
//   SetServerKeepalive(&builder);              // every server those channels reach

#ifndef EMBER_COMMON_KEEPALIVE_H_
#define EMBER_COMMON_KEEPALIVE_H_

#include "grpcpp/server_builder.h"
#include "grpcpp/support/channel_arguments.h"

namespace ember {

// A dead connection under a waiting call is closed within about 15 s.
inline constexpr int kKeepaliveTimeMs = 10000;
inline constexpr int kKeepaliveTimeoutMs = 5000;

// Pings every kKeepaliveTimeMs while calls are in flight, also when no data flows (a
// call waiting for its answer), and closes the connection after kKeepaliveTimeoutMs
// without the ping's acknowledgement.
void SetClientKeepalive(grpc::ChannelArguments* args);

// Accepts the pings of SetClientKeepalive (gRPC's default policy answers pings without
// data more often than every 5 minutes with GOAWAY), and pings its own clients every
// minute so that connections of vanished clients are closed.
void SetServerKeepalive(grpc::ServerBuilder* builder);

}  // namespace ember

#endif  // EMBER_COMMON_KEEPALIVE_H_
