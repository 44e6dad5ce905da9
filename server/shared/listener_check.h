// Copyright 2026 The Ember Authors.
//
// ListenerCheck: makes sure a server either accepts connections or exits to be
// restarted (issue 28 item 1.1). gRPC 1.51 stops accepting for good after one failed
// accept4 (EMFILE: the process ran out of file descriptors): it logs "Failed accept4:
// Too many open files" once and never re-arms its listener, while the process, its
// heartbeats and its calls on existing connections go on, so nothing restarts it. The
// kernel still completes handshakes into the listen backlog, so a bare connect() says
// nothing; the probe therefore connects and then watches the listening socket's backlog
// (/proc/net/tcp, tcp6: a listening socket's rx_queue is its connections not yet
// accepted) until it is empty. It sends no byte, so neither a plaintext nor a TLS server
// logs a failed handshake for it. A server whose backlog does not empty within the
// timeout, `failures` probes in a row, is broken: `on_broken` is called once with why,
// and the binary exits kExitRestartMe.
//
//   ListenerCheck check({.host = "127.0.0.1", .port = port,
//                        .interval = absl::Milliseconds(5000)},
//                       [&](const std::string& why) { ...stop, then exit 75... });
//   ...
//   check.Stop();  // before the server shuts down
//
// Thread-safety: Stop may be called from any thread but the check's own; `on_broken`
// runs on the check's own thread.

#ifndef EMBER_SERVER_SHARED_LISTENER_CHECK_H_
#define EMBER_SERVER_SHARED_LISTENER_CHECK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace ember {

// The exit code of a server that cannot serve any more and must be restarted (BSD's
// EX_TEMPFAIL): deploy/local/cluster.sh's supervisor restarts such a process;
// Kubernetes restarts any exited container. Not in common/flags.h's list (0, 1, 2)
// because only servers under a supervisor use it.
inline constexpr int kExitRestartMe = 75;

struct ListenerCheckOptions {
  std::string host = "127.0.0.1";  // the listening address; 0.0.0.0 and :: probe loopback
  int port = 0;
  // Between probes (--listener_check_ms). Default: 5 s.
  absl::Duration interval = absl::Seconds(5);
  // How long one probe waits for the server's reaction. Default: 2 s.
  absl::Duration timeout = absl::Seconds(2);
  // Consecutive failed probes that make the listener broken. Default: 3.
  int failures = 3;
};

// Connections waiting in the listen backlog of TCP port `port` (every listening socket
// on it, IPv4 and IPv6). UNAVAILABLE if /proc/net/tcp cannot be read.
absl::StatusOr<int64_t> AcceptBacklog(int port);

// One probe: connects to host:port and waits until `timeout` for the port's listen
// backlog to be empty (the server accepted). OK if it was; UNAVAILABLE naming the step
// that failed (socket, connect, the backlog) otherwise.
absl::Status ProbeListener(const std::string& host, int port, absl::Duration timeout);

class ListenerCheck {
 public:
  // Starts probing after one interval.
  ListenerCheck(ListenerCheckOptions options,
                std::function<void(const std::string& why)> on_broken);
  ListenerCheck(const ListenerCheck&) = delete;
  ListenerCheck& operator=(const ListenerCheck&) = delete;
  ~ListenerCheck();  // Stop()

  // Ends the probing and joins the thread. Idempotent.
  void Stop();

 private:
  void Run();

  const ListenerCheckOptions options_;
  const std::function<void(const std::string&)> on_broken_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace ember

#endif  // EMBER_SERVER_SHARED_LISTENER_CHECK_H_
