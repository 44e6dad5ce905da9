// Copyright 2026 The Ember Authors.

#include "server/shared/connection_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/log.h"
#include "common/metric_families.h"

namespace ember {
namespace {

constexpr int64_t kMaxAutoConnections = 16384;
// The longest a count in all goes without a recount: at the bound in all (a flood there
// costs an accept a recount of every connection at most this often), and in the accept
// loop (so that the book of a server under no bound does not grow with every
// connection it ever took).
constexpr absl::Duration kFullRecount = absl::Milliseconds(50);
constexpr absl::Duration kIdleRecount = absl::Seconds(10);

// The inode of the socket `fd` names, or 0 when it is closed or not a socket.
ino_t SocketInode(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  return st.st_ino;
}

// The peer's IP address; IPv4-mapped IPv6 addresses as IPv4.
std::string PeerAddress(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
  } else if (addr.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
      inet_ntop(AF_INET, &v6->sin6_addr.s6_addr[12], text, sizeof(text));
    } else {
      inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    }
  } else {
    return "unknown";
  }
  return text;
}

// True at the 1st, 10th, 100th, ... refusal of a kind: logs stay short under a flood.
bool WorthLogging(int64_t count) {
  while (count >= 10 && count % 10 == 0) count /= 10;
  return count == 1;
}

}  // namespace

std::string RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return absl::StrCat("open files: getrlimit failed: ", strerror(errno));
  }
  const rlim_t before = limit.rlim_cur;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      return absl::StrCat("open files: cannot raise the soft limit ", before, " to ",
                          limit.rlim_max, ": ", strerror(errno));
    }
  }
  return absl::StrCat("open files: limit ", limit.rlim_cur, " (soft was ", before, ")");
}

ConnectionLimits ConnectionLimitsFor(int64_t max_connections, int64_t max_per_peer) {
  ConnectionLimits limits;
  limits.max_per_peer = std::max<int64_t>(max_per_peer, 0);
  if (max_connections >= 0) {
    limits.max_connections = max_connections;
  } else {
    rlimit open_files{};
    const int64_t soft =
        getrlimit(RLIMIT_NOFILE, &open_files) == 0 && open_files.rlim_cur != RLIM_INFINITY
            ? static_cast<int64_t>(open_files.rlim_cur)
            : 2 * kMaxAutoConnections;
    limits.max_connections = std::clamp<int64_t>(soft / 2, 1, kMaxAutoConnections);
  }
  return limits;
}

struct ConnectionGate::Book {
  // An admitted connection: its descriptor and the inode of its socket.
  struct Held {
    int fd;
    ino_t inode;
  };

  // Drops the connections that are closed; returns how many remain.
  int64_t PruneLocked(std::vector<Held>* held) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const size_t before = held->size();
    held->erase(std::remove_if(held->begin(), held->end(),
                               [](const Held& h) { return SocketInode(h.fd) != h.inode; }),
                held->end());
    open -= static_cast<int64_t>(before - held->size());
    return static_cast<int64_t>(held->size());
  }
  // PruneAllLocked, unless the last one ran less than `every` ago.
  void PruneAllEvery(absl::Duration every) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const absl::Time now = absl::Now();
    if (now - last_full_prune < every) return;
    PruneAllLocked();
  }
  void PruneAllLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    last_full_prune = absl::Now();
    for (auto it = by_peer.begin(); it != by_peer.end();) {
      if (PruneLocked(&it->second) == 0) {
        by_peer.erase(it++);
      } else {
        ++it;
      }
    }
  }

  absl::Mutex mu;
  absl::flat_hash_map<std::string, std::vector<Held>> by_peer ABSL_GUARDED_BY(mu);
  int64_t open ABSL_GUARDED_BY(mu) = 0;
  Counts refused ABSL_GUARDED_BY(mu);
  absl::Time last_full_prune ABSL_GUARDED_BY(mu) = absl::InfinitePast();
};

class ConnectionGate::MetricsCollector final : public prometheus::Collectable {
 public:
  explicit MetricsCollector(std::shared_ptr<Book> book) : book_(std::move(book)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    int64_t open = 0;
    ConnectionGate::Counts refused;
    {
      absl::MutexLock lock(&book_->mu);
      book_->PruneAllLocked();
      open = book_->open;
      refused = book_->refused;
    }
    std::vector<prometheus::MetricFamily> out;
    FamilyWriter w(&out);
    w.Gauge("ember_connections_open",
            "Client connections the server admitted that are still open (ConnectionGate).",
            static_cast<double>(open));
    w.Labelled("ember_connections_refused_total",
               "Connections closed at accept: peer (--max_connections_per_peer from one "
               "address), total (--max_connections), fds (out of file descriptors).",
               prometheus::MetricType::Counter, "reason",
               {{"peer", static_cast<double>(refused.refused_peer)},
                {"total", static_cast<double>(refused.refused_total)},
                {"fds", static_cast<double>(refused.refused_fds)}});
    return out;
  }

 private:
  const std::shared_ptr<Book> book_;
};

absl::StatusOr<std::unique_ptr<ConnectionGate>> ConnectionGate::Listen(
    const std::string& host, uint32_t port, const ConnectionLimits& limits) {
  const std::string address = absl::StrCat(host, ":", port);
  std::string name = host;
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') {
    name = name.substr(1, name.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int resolved =
      getaddrinfo(name.empty() ? nullptr : name.c_str(), service.c_str(), &hints, &found);
  if (resolved != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", address, ": ", gai_strerror(resolved)));
  }
  std::string why = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = strerror(errno);
      continue;
    }
    const int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    // "::" takes IPv4 clients too, as gRPC's own listener does.
    if (a->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      why = strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": ", why));
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
    const std::string error = strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": ", error));
  }
  const int bound_port =
      ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    const std::string error = strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": eventfd: ", error));
  }
  return std::unique_ptr<ConnectionGate>(new ConnectionGate(fd, wake, bound_port, limits));
}

ConnectionGate::ConnectionGate(int listen_fd, int wake_fd, int port, const ConnectionLimits& limits)
    : listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      port_(port),
      limits_(limits),
      spare_fd_(open("/dev/null", O_RDONLY | O_CLOEXEC)),
      book_(std::make_shared<Book>()) {}

ConnectionGate::~ConnectionGate() {
  Stop();
  close(wake_fd_);
  if (spare_fd_ >= 0) close(spare_fd_);
}

void ConnectionGate::Start(
    std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor) {
  acceptor_ = std::move(acceptor);
  thread_ = std::thread([this] { AcceptLoop(); });
}

void ConnectionGate::Stop() {
  if (stopped_.exchange(true)) return;
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    // The eventfd cannot be full at one write; the loop also polls with a timeout.
  }
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
}

void ConnectionGate::AcceptLoop() {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  while (!stopped_.load(std::memory_order_acquire)) {
    const int ready = poll(fds, 2, /*timeout_ms=*/1000);
    {
      absl::MutexLock lock(&book_->mu);
      book_->PruneAllEvery(kIdleRecount);
    }
    if (ready <= 0 || (fds[0].revents & POLLIN) == 0) continue;
    // Drain the backlog: a flood must not wait a poll per connection.
    for (int i = 0; i < 64 && !stopped_.load(std::memory_order_acquire); ++i) AcceptOne();
  }
}

void ConnectionGate::AcceptOne() {
  sockaddr_storage addr{};
  socklen_t length = sizeof(addr);
  int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &length,
                   SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0 && (errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
    // Out of descriptors: free the spare one to take the connection off the backlog
    // and close it; a listener that leaves it there would be woken for it forever.
    close(spare_fd_);
    fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) close(fd);
    spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    absl::MutexLock lock(&book_->mu);
    const int64_t n = ++book_->refused.refused_fds;
    if (WorthLogging(n)) {
      EMBER_LOG(WARNING) << "out of file descriptors: closed a new connection at accept (" << n
                         << " so far)";
    }
    return;
  }
  if (fd < 0) return;  // EAGAIN (the backlog is empty), ECONNABORTED, EINTR, ...
  const std::string peer = PeerAddress(addr);
  {
    absl::MutexLock lock(&book_->mu);
    // Counts are recounted only at a bound (a peer's: its max_per_peer descriptors; in
    // all: at most every kFullRecount), so that a flood costs each accept little.
    auto it = book_->by_peer.find(peer);
    int64_t from_peer = it == book_->by_peer.end() ? 0 : static_cast<int64_t>(it->second.size());
    if (limits_.max_per_peer > 0 && from_peer >= limits_.max_per_peer) {
      from_peer = book_->PruneLocked(&it->second);
    }
    const char* flag = nullptr;
    int64_t limit = 0;
    int64_t refused = 0;
    if (limits_.max_per_peer > 0 && from_peer >= limits_.max_per_peer) {
      flag = "--max_connections_per_peer";
      limit = limits_.max_per_peer;
      refused = ++book_->refused.refused_peer;
    } else if (limits_.max_connections > 0 && book_->open >= limits_.max_connections) {
      book_->PruneAllEvery(kFullRecount);
      if (book_->open >= limits_.max_connections) {
        flag = "--max_connections";
        limit = limits_.max_connections;
        refused = ++book_->refused.refused_total;
      }
    }
    if (flag != nullptr) {
      close(fd);
      if (WorthLogging(refused)) {
        EMBER_LOG(WARNING) << "refused a connection from " << peer << ": " << flag << "=" << limit
                           << " reached (" << refused << " refused so far)";
      }
      return;
    }
    book_->by_peer[peer].push_back({fd, SocketInode(fd)});
    ++book_->open;
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters params;
  params.listener_fd = listen_fd_;
  params.fd = fd;
  acceptor_->HandleNewConnection(&params);  // gRPC owns fd from here on
}

ConnectionGate::Counts ConnectionGate::counts() {
  absl::MutexLock lock(&book_->mu);
  book_->PruneAllLocked();
  Counts out = book_->refused;
  out.open = book_->open;
  return out;
}

int64_t ConnectionGate::OpenFrom(const std::string& peer) {
  absl::MutexLock lock(&book_->mu);
  auto it = book_->by_peer.find(peer);
  return it == book_->by_peer.end() ? 0 : book_->PruneLocked(&it->second);
}

std::shared_ptr<prometheus::Collectable> ConnectionGate::Collector() {
  return std::make_shared<MetricsCollector>(book_);
}

}  // namespace ember
