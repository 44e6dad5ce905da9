// Copyright 2026 The Ember Authors.
//
// The command framework of emberctl. A command declares its flags once, in a FlagSet
// (common/flags.h) bound to the fields of its own options struct; its usage (--help),
// its synopsis and its flag parser come from that declaration. After parsing, the
// command's `finish` checks what FlagSet cannot state (positional arguments, flags that
// depend on each other) and returns the runner (an error there is a usage error: exit 2);
// the runner talks to the cluster (an error: exit 1).
//
//   struct ShowOptions { std::optional<uint32_t> shard; };
//   void DeclareShow(FlagSet& flags, ShowOptions& o) {
//     flags.Number("shard", &o.shard, "N", "only this shard");
//   }
//   absl::StatusOr<Runner> FinishShow(const Args& args, const ShowOptions& o) {
//     EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
//     return Runner([o](Session& s) { return SlotsShow(s, o.shard); });
//   }
//   Command("slots", "show", "", "Slot count ...", DeclareShow, FinishShow)

#ifndef EMBER_TOOLS_EMBERCTL_CLI_H_
#define EMBER_TOOLS_EMBERCTL_CLI_H_

#include <cstdint>
#include <functional>
#include <memory>
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
  const FlagSet* parsed = nullptr;  // in Finish: the command's flags (FlagSet::Given)
};

// What turns the parsed flags and the positional arguments into the runner.
using Finish = std::function<absl::StatusOr<Runner>(const Args& args)>;

struct CommandSpec {
  const char* group;        // "slots"; nullptr for a command without subcommands
  const char* name;         // "move"; or the command itself ("status")
  const char* positionals;  // what follows the name in the synopsis ("NAME"); "" for none
  const char* description;  // the help text before the flags
  // Declares the command's flags on `flags`, bound to options the returned Finish reads
  // once `flags` has parsed the command line.
  std::function<Finish(FlagSet& flags)> declare;
};

// A command whose flags `declare` binds to an Options (default-constructed: its fields
// are the defaults) and whose `finish` makes the runner from them.
template <typename Options>
CommandSpec Command(const char* group, const char* name, const char* positionals,
                    const char* description, void (*declare)(FlagSet&, Options&),
                    absl::StatusOr<Runner> (*finish)(const Args&, const Options&)) {
  return {group, name, positionals, description, [declare, finish](FlagSet& flags) -> Finish {
            auto options = std::make_shared<Options>();
            declare(flags, *options);
            return [options, finish](const Args& args) { return finish(args, *options); };
          }};
}

// For commands without flags of their own.
struct NoFlags {};
inline void DeclareNoFlags(FlagSet&, NoFlags&) {}

// "slots move": the command's words.
std::string CommandName(const CommandSpec& spec);
// The synopsis: "slots move --slots=LIST --to=N [--dry_run] ...". `brief` (the
// overviews): one that does not fit a line names only the required flags, then
// "[flags]".
std::string Synopsis(const CommandSpec& spec, bool brief = false);
// The command's --help text without the global flags.
std::string CommandUsage(const CommandSpec& spec);
// Parses `args.flags` as the command declares them and finishes: the runner or a usage
// error (INVALID_ARGUMENT).
absl::StatusOr<Runner> ParseCommand(const CommandSpec& spec, const Args& args);

// Every command, in the order the overview lists them (commands_*.cc).
std::vector<CommandSpec> StatusCommands();
std::vector<CommandSpec> TableCommands();
std::vector<CommandSpec> SlotCommands();
std::vector<CommandSpec> MigrationCommands();
std::vector<CommandSpec> CheckpointCommands();
std::vector<CommandSpec> ExportCommands();
std::vector<CommandSpec> ServingCommands();
std::vector<CommandSpec> HotKeyCommands();
std::vector<CommandSpec> JobCommands();

// ---- Parsing helpers (all return INVALID_ARGUMENT, a usage error) ----

// Between min and max positional arguments, named `what` in the message.
absl::Status CheckPositionals(const Args& args, size_t min, size_t max, absl::string_view what);
absl::Status MissingFlag(const Args& args, absl::string_view name);
// `--by=rows|load|slots` into *by.
FlagSet::Decl DeclareBy(FlagSet& flags, v1::PlanRebalanceRequest::By* by, absl::string_view help);

// ---- Running helpers ----

// Writes j's object (json mode) and a newline to s.out.
void PrintJson(Session& s, const JsonWriter& j);

// The job table of `status` and `jobs list` (commands_jobs.cc).
std::string JobsText(const v1::ListJobsResponse& jobs);

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
