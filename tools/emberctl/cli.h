// Copyright 2026 The Ember Authors.
//
// The command framework of emberctl. A command is a parser and a runner: the parser
// checks the command's flags and positional arguments and returns the runner (a bad
// flag is a usage error: exit 2); the runner talks to the cluster (an error: exit 1).
//
//   absl::StatusOr<Runner> ParseShow(const Args& args) {
//     std::optional<uint32_t> shard;
//     for (const Flag& f : args.flags) {
//       if (f.name == "shard") { ... } else { return UnknownFlag(args, f); }
//     }
//     return Runner([shard](Session& s) { return SlotsShow(s, shard); });
//   }

#ifndef EMBER_TOOLS_EMBERCTL_CLI_H_
#define EMBER_TOOLS_EMBERCTL_CLI_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "common/tls.h"
#include "tools/emberctl/admin_client.h"
#include "tools/emberctl/output.h"

namespace ember::ctl {

// Flags every command accepts (anywhere on the command line).
struct GlobalOptions {
  std::string coordinator;  // main fills in EMBER_COORDINATOR or 127.0.0.1:6000
  std::string admin_token;
  TlsOptions tls;              // --tls_*, else $EMBER_TLS_CA/CERT/KEY
  bool json = false;           // one JSON object on stdout instead of text
  int64_t timeout_ms = 10000;  // deadline of every RPC
};

// What a runner works with.
struct Session {
  GlobalOptions options;
  AdminClient* client;
  std::ostream* out;  // results
  std::ostream* err;  // progress and notes
};

using Runner = std::function<absl::Status(Session&)>;

// A command line after the global flags and the command words are taken out.
struct Args {
  std::string command;  // "slots move", for messages
  std::vector<absl::string_view> positionals;
  std::vector<Flag> flags;
};

struct CommandSpec {
  const char* group;     // "slots"; nullptr for a command without subcommands
  const char* name;      // "move"; or the command itself ("status")
  const char* synopsis;  // one line: "slots move --slots=LIST --to=N [...]"
  const char* usage;     // the command's full help text (flags after the synopsis)
  absl::StatusOr<Runner> (*parse)(const Args& args);
};

// Every command, in the order the overview lists them (commands_*.cc).
std::vector<CommandSpec> StatusCommands();
std::vector<CommandSpec> TableCommands();
std::vector<CommandSpec> SlotCommands();
std::vector<CommandSpec> MigrationCommands();
std::vector<CommandSpec> CheckpointCommands();
std::vector<CommandSpec> ExportCommands();
std::vector<CommandSpec> ServingCommands();
std::vector<CommandSpec> HotKeyCommands();

// ---- Parsing helpers (all return INVALID_ARGUMENT, a usage error) ----

absl::Status UnknownFlag(const Args& args, const Flag& flag);
// For commands without flags: UnknownFlag for the first one.
absl::Status CheckNoFlags(const Args& args);
// Between min and max positional arguments, named `what` in the message.
absl::Status CheckPositionals(const Args& args, size_t min, size_t max, absl::string_view what);
absl::Status MissingFlag(const Args& args, absl::string_view name);
absl::Status ParseDouble(const Flag& flag, double* out);
// `--by=rows|load|slots`.
absl::Status ParseBy(const Flag& flag, v1::PlanRebalanceRequest::By* out);

// ---- Running helpers ----

// Writes j's object (json mode) and a newline to s.out.
void PrintJson(Session& s, const JsonWriter& j);

// Ctrl-C while a command follows something that keeps running elsewhere (a
// migration): inside a scope, SIGINT sets a flag instead of ending the process, so the
// command can say what keeps running. Outside, SIGINT ends the process as usual.
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
};

// Sleeps `d` in small steps; false (early) when Ctrl-C arrived in an InterruptScope.
bool SleepUnlessInterrupted(absl::Duration d);

// The shard state's name ("ALIVE", "DEAD", "UNKNOWN").
std::string StateName(v1::ShardInfo::State state);

}  // namespace ember::ctl

#endif  // EMBER_TOOLS_EMBERCTL_CLI_H_
