// Copyright 2026 The Ember Authors.

#include "tools/harness/process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ember {
namespace {

absl::Status ErrnoError(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

int ExitCode(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

// How long Reap waits for a SIGKILLed child to be reaped, and for the drain thread to
// see the end of the child's stdout, before giving up (a stuck child is reported, never
// waited on forever).
constexpr absl::Duration kKillWait = absl::Seconds(30);

int64_t RemainingMs(absl::Time deadline) {
  // Clamped to what poll() takes; an infinite deadline waits in 24-day steps.
  return std::clamp<int64_t>(absl::ToInt64Milliseconds(deadline - absl::Now()), 0, INT32_MAX);
}

// The drain thread: copies the child's stdout (`fd`) to stderr until EOF; once Reap
// signals `stop` (the child is gone), copies what is left without blocking and ends,
// even if something else still holds the pipe open.
void DrainToStderr(int fd, int stop) {
  bool stopping = false;
  char chunk[4096];
  while (true) {
    pollfd p[2] = {{fd, POLLIN, 0}, {stop, POLLIN, 0}};
    const int ready = poll(p, stopping ? 1 : 2, stopping ? 0 : -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return;  // error, or stopping and nothing left
    if (!stopping && (p[1].revents & (POLLIN | POLLHUP)) != 0) stopping = true;
    if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    const ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    (void)!write(STDERR_FILENO, chunk, n);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Process>> Process::Start(const std::string& binary,
                                                        const std::vector<std::string>& args,
                                                        const std::string& ready_prefix,
                                                        absl::Duration timeout) {
  // Everything the child needs is built before vfork: between vfork and exec the child
  // only makes system calls (prctl, getppid, dup2, execv, _exit), all async-signal-safe;
  // it allocates nothing and runs no atfork handler (gRPC's threads keep running in
  // the parent).
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    close(fds[0]);
    close(fds[1]);
    return ErrnoError("pipe2");
  }
  const pid_t parent = getpid();
  const pid_t pid = vfork();
  if (pid < 0) {
    for (int fd : {fds[0], fds[1], wake[0], wake[1]}) close(fd);
    return ErrnoError("vfork");
  }
  if (pid == 0) {
    // If the test process dies (a crash, an abort), so does the child: an orphaned
    // server would keep the test's stderr open and hang the runner (ctest) until its
    // timeout. PDEATHSIG follows the thread that started the child; see process.h.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    dup2(fds[1], STDOUT_FILENO);          // dup2 clears O_CLOEXEC on the new descriptor
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  std::unique_ptr<Process> process(new Process(pid, fds[0], wake[0], wake[1]));

  const absl::Status ready = process->AwaitReady(binary, ready_prefix, absl::Now() + timeout);
  if (!ready.ok()) return ready;
  return process;
}

absl::Status Process::AwaitReady(const std::string& binary, const std::string& ready_prefix,
                                 absl::Time deadline) {
  std::string buffer;
  while (true) {
    size_t newline;
    while ((newline = buffer.find('\n')) != std::string::npos) {
      std::string line = buffer.substr(0, newline);
      buffer.erase(0, newline + 1);
      if (line.rfind(ready_prefix, 0) == 0) {
        ready_text_ = line.substr(ready_prefix.size());
        const int fd = stdout_fd_;
        const int stop = wake_read_fd_;
        drain_ = std::thread([fd, stop] { DrainToStderr(fd, stop); });
        return absl::OkStatus();
      }
    }
    pollfd p{stdout_fd_, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(RemainingMs(deadline)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return ErrnoError("poll");
    if (ready == 0) {
      return absl::DeadlineExceededError(
          absl::StrCat(binary, " printed no '", ready_prefix, "' line in time"));
    }
    char chunk[4096];
    const ssize_t n = read(stdout_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat(binary, " closed stdout (exited?) before '", ready_prefix, "'"));
    }
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

Process::~Process() {
  if (running_) (void)Reap(SIGKILL, absl::ZeroDuration());
  StopDrain();
  close(stdout_fd_);
  close(wake_read_fd_);
  close(wake_write_fd_);
}

void Process::StopDrain() {
  if (!drain_.joinable()) return;
  const char byte = 0;
  (void)!write(wake_write_fd_, &byte, 1);
  drain_.join();
}

int Process::WaitFor(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  // A pidfd becomes readable when the child exits: no sleeping poll loop.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      if (pidfd >= 0) close(pidfd);
      return status;
    }
    if (r < 0 && errno != EINTR) break;
    const int64_t left = RemainingMs(deadline);
    if (left == 0) break;
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      poll(&p, 1, static_cast<int>(left));
    } else {
      usleep(static_cast<useconds_t>(std::min<int64_t>(left, 10) * 1000));
    }
  }
  if (pidfd >= 0) close(pidfd);
  return -1;
}

int Process::Reap(int signal_number, absl::Duration grace) {
  kill(pid_, signal_number);
  int status = WaitFor(grace);
  if (status == -1) {
    if (signal_number != SIGKILL) kill(pid_, SIGKILL);
    status = WaitFor(kKillWait);  // SIGKILL cannot be ignored; bounded all the same
  }
  running_ = false;
  StopDrain();
  return status;
}

absl::StatusOr<int> Process::Stop(absl::Duration grace) {
  if (!running_) return absl::FailedPreconditionError("process already stopped");
  const int status = Reap(SIGTERM, grace);
  if (status == -1) return absl::DeadlineExceededError("child not reaped after SIGKILL");
  return ExitCode(status);
}

absl::StatusOr<int> Process::Kill() {
  if (!running_) return absl::FailedPreconditionError("process already stopped");
  const int status = Reap(SIGKILL, absl::ZeroDuration());
  if (status == -1) return absl::DeadlineExceededError("child not reaped after SIGKILL");
  return ExitCode(status);
}

absl::StatusOr<int> Process::Wait(absl::Duration timeout) {
  if (!running_) return absl::FailedPreconditionError("process already stopped");
  const int status = WaitFor(timeout);
  if (status == -1) return absl::DeadlineExceededError("child still running");
  running_ = false;
  StopDrain();
  return ExitCode(status);
}

RunResult RunBinary(const std::string& binary, const std::string& args) {
  RunResult result;
  FILE* pipe = popen((binary + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof(chunk), pipe)) > 0) result.output.append(chunk, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace ember
