// Copyright 2026 The Ember Authors.
//
// ember-noop-ps: serves NoopPsService (noop_server.h), the transport ceiling of
// `ember-bench cluster`. Not a tool for anything else.
//
//   ember-noop-ps [--port=N] [--pull_values_bytes=N]
//
// Binds 127.0.0.1 (--port=0, the default, picks a free port), prints exactly one line
// "listening on 127.0.0.1:PORT" to stdout once serving, and exits 0 on SIGTERM/SIGINT.

#include <signal.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <string_view>

#include "common/malloc_tuning.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "tools/bench/noop_server.h"

namespace {

constexpr char kUsage[] =
    "usage: ember-noop-ps [--port=N (default 0: any free port)] "
    "[--pull_values_bytes=N (default 256000)]\n";

bool ParseFlag(std::string_view arg, std::string_view name, uint64_t* out) {
  const std::string prefix = "--" + std::string(name) + "=";
  if (arg.substr(0, prefix.size()) != prefix) return false;
  const std::string_view value = arg.substr(prefix.size());
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), *out);
  return ec == std::errc() && ptr == value.data() + value.size();
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t port = 0;
  uint64_t pull_values_bytes = 256000;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (!ParseFlag(arg, "port", &port) &&
        !ParseFlag(arg, "pull_values_bytes", &pull_values_bytes)) {
      std::cerr << "ember-noop-ps: bad argument '" << arg << "'\n" << kUsage;
      return 2;
    }
  }
  if (port > 65535 || pull_values_bytes > (uint64_t{1} << 30)) {
    std::cerr << "ember-noop-ps: value out of range\n" << kUsage;
    return 2;
  }

  // The same allocator settings as every Ember binary (RunMain): the ceiling the bench
  // compares against is the transport's, not glibc's page faults.
  ember::KeepFreedBuffers();

  // Only sigwait below receives the shutdown signals (gRPC's threads inherit the mask).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ember::bench::NoopPsService service(pull_values_bytes);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &bound_port);
  // ember-ps's defaults (--max_message_mb=256).
  builder.SetMaxReceiveMessageSize(256 << 20);
  builder.SetMaxSendMessageSize(256 << 20);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    std::cerr << "ember-noop-ps: cannot listen on 127.0.0.1:" << port << std::endl;
    return 1;
  }
  std::cout << "listening on 127.0.0.1:" << bound_port << std::endl;

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  return 0;
}
