// Copyright 2026 The Ember Authors.
//
// Raw HTTP/2 connections to a gRPC server, as a careless or hostile client opens them:
// a TCP connection that sends the HTTP/2 client preface and one empty SETTINGS frame,
// then nothing (issue 28 item 1.1's flood). No gRPC, so nothing answers the server's
// pings or reads its frames unless the test does.
//
//   absl::StatusOr<RawH2Flood> flood = RawH2Flood::Open("127.0.0.1", port, 500);
//   EXPECT_TRUE(Eventually([&] { return flood->CountClosedByServer() == 500; }));

#ifndef EMBER_TESTS_SUPPORT_RAW_H2_H_
#define EMBER_TESTS_SUPPORT_RAW_H2_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ember {

class RawH2Flood {
 public:
  // Opens up to `count` connections to host:port (IPv4), from the address `source`
  // when one is given (a loopback address such as 127.0.0.2: another client), each
  // sending the preface and an empty SETTINGS frame. A connection the server closed
  // before the preface was sent counts as opened (and closed). Stops early, without
  // error, when this process or the server runs out (connect or socket fails): opened()
  // says how many. UNAVAILABLE if not even one connection could be opened.
  static absl::StatusOr<RawH2Flood> Open(const std::string& host, int port, int count,
                                         const std::string& source = "");

  RawH2Flood(RawH2Flood&& other) noexcept;
  RawH2Flood& operator=(RawH2Flood&& other) noexcept;
  RawH2Flood(const RawH2Flood&) = delete;
  RawH2Flood& operator=(const RawH2Flood&) = delete;
  ~RawH2Flood();  // CloseAll()

  int opened() const { return static_cast<int>(fds_.size()); }
  // Reads (and drops) what the server sent on every connection without blocking and
  // returns how many connections the server has closed (EOF or reset).
  int CountClosedByServer();
  void CloseAll();

 private:
  RawH2Flood() = default;
  std::vector<int> fds_;
  std::vector<bool> closed_;
};

}  // namespace ember

#endif  // EMBER_TESTS_SUPPORT_RAW_H2_H_
