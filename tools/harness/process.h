// Copyright 2026 The Ember Authors.
//
// Process: a child process for multi-process tests. Starts a binary with vfork/exec
// (nothing but system calls between them, so it is safe in a process running gRPC
// threads), waits (with a deadline) for a readiness line on its stdout, and stops it by
// PID: SIGTERM, then SIGKILL after a grace period. The child is reaped, also by the
// destructor; every wait is bounded. The child's stderr is inherited; its stdout after
// the ready line is copied to this process's stderr by a drain thread (so the child
// never blocks on a full pipe).
//
// The child gets SIGKILL when the thread that started it exits (PR_SET_PDEATHSIG), so a
// crashed test leaves no server behind holding the runner's output open. Start
// processes from a thread that outlives them (the test's main thread).
//
//   EMBER_ASSIGN_OR_RETURN(std::unique_ptr<Process> ps,
//       Process::Start(EMBER_PS_BINARY, {"--data_dir=/tmp/x", "--port=0"},
//                      "listening on ", absl::Seconds(30)));
//   std::string address = ps->ready_text();  // "127.0.0.1:PORT"
//   EMBER_ASSIGN_OR_RETURN(int exit_code, ps->Stop(absl::Seconds(10)));
//
// Thread-safety: one thread at a time.

#ifndef EMBER_TOOLS_HARNESS_PROCESS_H_
#define EMBER_TOOLS_HARNESS_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ember {

class Process {
 public:
  // Starts `binary` with `args` and reads its stdout until a line starting with
  // `ready_prefix`. Errors: INTERNAL if fork/exec/pipe fail; DEADLINE_EXCEEDED if no
  // ready line came within `timeout`; UNAVAILABLE if the child exited first. On error
  // the child is killed and reaped.
  static absl::StatusOr<std::unique_ptr<Process>> Start(const std::string& binary,
                                                        const std::vector<std::string>& args,
                                                        const std::string& ready_prefix,
                                                        absl::Duration timeout);

  // Kills (SIGKILL) and reaps the child if it still runs.
  ~Process();

  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  // The ready line without `ready_prefix`.
  const std::string& ready_text() const { return ready_text_; }
  // False once the child was reaped (by Stop, Kill, or a Wait that saw it exit); a
  // child that exited on its own is running until then.
  bool running() const { return running_; }

  // Sends SIGTERM; if the child has not exited after `grace`, sends SIGKILL. Reaps it
  // and returns its exit code, or 128 + signal if a signal ended it.
  // FAILED_PRECONDITION if already stopped; DEADLINE_EXCEEDED if it could not be
  // reaped within 30 s of the SIGKILL.
  absl::StatusOr<int> Stop(absl::Duration grace);

  // SIGKILL now (a crash), reaps; returns as Stop.
  absl::StatusOr<int> Kill();

  // Waits up to `timeout` for the child to exit on its own, reaps it and returns as
  // Stop. DEADLINE_EXCEEDED if it still runs (it is left running);
  // FAILED_PRECONDITION if already stopped.
  absl::StatusOr<int> Wait(absl::Duration timeout);

 private:
  Process(pid_t pid, int stdout_fd, int wake_read_fd, int wake_write_fd)
      : pid_(pid),
        stdout_fd_(stdout_fd),
        wake_read_fd_(wake_read_fd),
        wake_write_fd_(wake_write_fd) {}

  // Start's last phase: reads the child's stdout until a line starts with
  // `ready_prefix` (its rest is ready_text_), then starts the drain thread.
  // DEADLINE_EXCEEDED past `deadline`; UNAVAILABLE if stdout closes first.
  absl::Status AwaitReady(const std::string& binary, const std::string& ready_prefix,
                          absl::Time deadline);
  // Waits until the child exits or `timeout` passes. Returns its wait status, or -1
  // on timeout.
  int WaitFor(absl::Duration timeout);
  // Sends `signal_number`, waits `grace`, then SIGKILLs; reaps. Returns the wait status,
  // or -1 if the child was not reaped (bounded wait).
  int Reap(int signal_number, absl::Duration grace);
  // Tells the drain thread to copy what is left and end; joins it.
  void StopDrain();

  pid_t pid_;
  int stdout_fd_;
  int wake_read_fd_;  // readable once the drain thread should stop
  int wake_write_fd_;
  bool running_ = true;
  std::string ready_text_;
  std::thread drain_;
};

// A binary run to completion (flag and usage tests): its exit code and output.
struct RunResult {
  int exit_code = -1;  // -1 when it could not run or a signal ended it
  std::string output;  // stdout and stderr
};

// Runs `binary args` through the shell (`args` is shell text) and waits for it.
RunResult RunBinary(const std::string& binary, const std::string& args);

}  // namespace ember

#endif  // EMBER_TOOLS_HARNESS_PROCESS_H_
