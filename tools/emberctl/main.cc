// Copyright 2026 The Ember Authors.
//
// emberctl: the operator CLI of an Ember cluster.
//
//   emberctl [global flags] COMMAND [SUBCOMMAND] [ARGS] [flags]
//   emberctl --coordinator=10.0.0.9:6000 --admin_token_file=/etc/ember/token status
//   emberctl slots move --slots=0-99 --to=2 --json
//
// Global flags may appear anywhere. The environment is read here only:
// EMBER_COORDINATOR (default of --coordinator) and EMBER_ADMIN_TOKEN_FILE (default of
// --admin_token_file). Exit codes: 0 success (and --help, --version), 1 the operation
// failed ("emberctl: <status>" on stderr), 2 bad usage (the message and which --help to
// run on stderr; common/flags.h).

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/admin_auth.h"
#include "common/flags.h"
#include "common/status_macros.h"
#include "tools/emberctl/admin_client.h"
#include "tools/emberctl/cli.h"

namespace ember::ctl {
namespace {

constexpr char kDefaultCoordinator[] = "127.0.0.1:6000";

// The global flags as parsed; ParseGlobal turns them into GlobalOptions.
struct GlobalFlags {
  GlobalOptions options;
  std::string token_file;
  LogFormat log_format = LogFormat::kText;
};

void DeclareGlobalFlags(FlagSet& flags, GlobalFlags& g) {
  GlobalOptions& o = g.options;
  o.coordinator = kDefaultCoordinator;
  flags.Section("Global flags (anywhere on the command line):");
  flags.String("coordinator", &o.coordinator, "HOST:PORT", "the coordinator")
      .NonEmpty()
      .Env({"EMBER_COORDINATOR"});
  flags
      .String("admin_token", &o.admin_token, "T",
              "credential of AdminService calls (metadata ember-admin-token)")
      .NonEmpty();
  flags.String("admin_token_file", &g.token_file, "F",
               "read the credential from F; without it and --admin_token, from the file "
               "$EMBER_ADMIN_TOKEN_FILE names");
  flags.String("tls_ca", &o.tls.ca_file, "F",
               "mutual TLS to a cluster that runs with it: the CA (an admin certificate is an "
               "admin credential). Without any --tls_* flag: $EMBER_TLS_CA, $EMBER_TLS_CERT, "
               "$EMBER_TLS_KEY");
  flags.String("tls_cert", &o.tls.cert_file, "F", "this client's certificate");
  flags.String("tls_key", &o.tls.key_file, "F", "its private key");
  flags.Bool("json", &o.json, "print one JSON object on stdout instead of text");
  flags.Number("timeout_ms", &o.timeout_ms, "N", "deadline of every RPC").Range(1, 3600000);
  DeclareLogFormatFlag(flags, &g.log_format);
  flags.Custom("version", "", "print \"emberctl VERSION (commit COMMIT)\" and exit",
               [](const Flag&) { return absl::OkStatus(); });
  flags.Custom("help", "", "this text; after a command, the command's",
               [](const Flag&) { return absl::OkStatus(); });
}

// The global flags' usage, the end of every usage text.
std::string GlobalUsage() {
  GlobalFlags unused;
  FlagSet flags("emberctl");
  DeclareGlobalFlags(flags, unused);
  return absl::StrCat(flags.FlagsUsage(),
                      "\nExit codes: 0 ok, 1 the operation failed, 2 bad usage.\n");
}

std::vector<CommandSpec> AllCommands() {
  std::vector<CommandSpec> all;
  for (auto list : {StatusCommands, JobCommands, TableCommands, SlotCommands, MigrationCommands,
                    CheckpointCommands, ExportCommands, ServingCommands, HotKeyCommands}) {
    for (const CommandSpec& c : list()) all.push_back(c);
  }
  return all;
}

std::string Overview(const std::vector<CommandSpec>& all) {
  std::string out = "usage: emberctl [global flags] COMMAND [SUBCOMMAND] [flags]\n\nCommands:\n";
  for (const CommandSpec& c : all) absl::StrAppend(&out, "  ", Synopsis(c, /*brief=*/true), "\n");
  absl::StrAppend(&out,
                  "\n`emberctl COMMAND [SUBCOMMAND] --help` describes a command. Flags are "
                  "--name=value;\n'-' and '_' in names are the same (--dry-run = --dry_run).\n\n",
                  GlobalUsage());
  return out;
}

std::string GroupUsage(const std::vector<CommandSpec>& all, absl::string_view group) {
  std::string out = absl::StrCat("usage: emberctl [global flags] ", group,
                                 " SUBCOMMAND [flags]\n\nSubcommands:\n");
  for (const CommandSpec& c : all) {
    if (c.group != nullptr && group == c.group)
      absl::StrAppend(&out, "  ", Synopsis(c, /*brief=*/true), "\n");
  }
  absl::StrAppend(&out, "\n`emberctl ", group, " SUBCOMMAND --help` describes one.\n\n",
                  GlobalUsage());
  return out;
}

std::string LeafUsage(const CommandSpec& c) {
  return absl::StrCat("usage: emberctl [global flags] ", Synopsis(c), "\n\n", CommandUsage(c), "\n",
                      GlobalUsage());
}

struct CommandLine {
  bool help = false;
  bool version = false;
  std::vector<absl::string_view> words;  // command, subcommand, positional arguments
  std::vector<Flag> global;
  std::vector<Flag> local;
};

absl::StatusOr<CommandLine> Split(int argc, char** argv, const FlagSet& global) {
  CommandLine line;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      line.help = true;
    } else if (arg == "--version") {
      line.version = true;
    } else if (arg.substr(0, 2) == "--" && arg.size() > 2) {
      // --dry-run and --dry_run are the same flag: names are normalized to '_' in place.
      for (char* c = argv[i] + 2; *c != '\0' && *c != '='; ++c) {
        if (*c == '-') *c = '_';
      }
      arg = argv[i];
      arg.remove_prefix(2);
      Flag flag;
      const size_t eq = arg.find('=');
      flag.name = arg.substr(0, eq);
      flag.has_value = eq != absl::string_view::npos;
      if (flag.has_value) flag.value = arg.substr(eq + 1);
      (global.Has(flag.name) ? line.global : line.local).push_back(flag);
    } else if (!arg.empty() && arg[0] == '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", arg, "' (flags are --name=value)"));
    } else {
      line.words.push_back(arg);
    }
  }
  return line;
}

// The token of `path` (common/admin_auth.h), errors prefixed with where the path came
// from.
absl::StatusOr<std::string> ReadToken(const std::string& path, absl::string_view source) {
  absl::StatusOr<std::string> token = ReadAdminTokenFile(path);
  if (!token.ok()) {
    return absl::Status(token.status().code(),
                        absl::StrCat(source, ": ", token.status().message()));
  }
  return token;
}

// The global flags, then the environment: $EMBER_TLS_* without any --tls_* flag, the
// token file of $EMBER_ADMIN_TOKEN_FILE without --admin_token(_file).
absl::StatusOr<GlobalOptions> ParseGlobal(FlagSet& flags, GlobalFlags& g) {
  GlobalOptions& o = g.options;
  const bool have_token = flags.Given("admin_token");
  if (have_token && !g.token_file.empty()) {
    return absl::InvalidArgumentError("give --admin_token or --admin_token_file, not both");
  }
  if (!o.tls.enabled()) {
    for (auto [name, file] :
         {std::pair{"EMBER_TLS_CA", &o.tls.ca_file}, std::pair{"EMBER_TLS_CERT", &o.tls.cert_file},
          std::pair{"EMBER_TLS_KEY", &o.tls.key_file}}) {
      const char* env = std::getenv(name);
      if (env != nullptr) *file = env;
    }
  }
  if (!g.token_file.empty()) {
    EMBER_ASSIGN_OR_RETURN(o.admin_token, ReadToken(g.token_file, "--admin_token_file"));
  } else if (!have_token) {
    const char* env = std::getenv("EMBER_ADMIN_TOKEN_FILE");
    if (env != nullptr && env[0] != '\0') {
      EMBER_ASSIGN_OR_RETURN(o.admin_token, ReadToken(env, "EMBER_ADMIN_TOKEN_FILE"));
    }
  }
  return o;
}

int Main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const std::vector<CommandSpec> all = AllCommands();
  GlobalFlags global_flags;
  FlagSet global_set("emberctl");
  DeclareGlobalFlags(global_set, global_flags);
  // A usage error: the message, and which --help to run.
  auto usage_error = [](const absl::Status& status, absl::string_view command) {
    return UsageError("emberctl", status.message(), command);
  };
  absl::StatusOr<CommandLine> line = Split(argc, argv, global_set);
  if (!line.ok()) return usage_error(line.status(), "emberctl");
  if (line->version && !line->help) {
    std::cout << VersionLine("emberctl") << std::endl;
    return 0;
  }
  if (line->words.empty()) {
    if (line->help) {
      std::cout << Overview(all);
      return 0;
    }
    return usage_error(absl::InvalidArgumentError("missing command"), "emberctl");
  }

  // Find the command: a group and its subcommand, or a command of its own.
  const absl::string_view first = line->words[0];
  const CommandSpec* spec = nullptr;
  size_t used_words = 1;
  bool is_group = false;
  std::vector<std::string> subcommands;
  for (const CommandSpec& c : all) {
    if (c.group != nullptr && first == c.group) {
      is_group = true;
      subcommands.push_back(c.name);
      if (line->words.size() > 1 && line->words[1] == c.name) spec = &c;
    } else if (c.group == nullptr && first == c.name) {
      spec = &c;
    }
  }
  if (is_group) {
    used_words = 2;
    if (spec == nullptr) {
      if (line->words.size() == 1 && line->help) {
        std::cout << GroupUsage(all, first);
        return 0;
      }
      const std::string message =
          line->words.size() == 1
              ? absl::StrCat("'", first, "' needs a subcommand: ", absl::StrJoin(subcommands, ", "))
              : absl::StrCat("unknown subcommand '", line->words[1], "' for '", first, "'");
      return usage_error(absl::InvalidArgumentError(message), absl::StrCat("emberctl ", first));
    }
  }
  if (spec == nullptr) {
    return usage_error(absl::InvalidArgumentError(absl::StrCat("unknown command '", first, "'")),
                       "emberctl");
  }
  if (line->help) {
    std::cout << LeafUsage(*spec);
    return 0;
  }

  Args args;
  args.command = CommandName(*spec);
  args.positionals.assign(line->words.begin() + used_words, line->words.end());
  args.flags = line->local;
  const std::string help_command = absl::StrCat("emberctl ", args.command);
  absl::StatusOr<Runner> runner = ParseCommand(*spec, args);
  if (!runner.ok()) return usage_error(runner.status(), help_command);
  absl::Status parsed = global_set.Parse(line->global);
  if (!parsed.ok()) return usage_error(parsed, help_command);
  InitLogging("emberctl", global_flags.log_format);
  absl::StatusOr<GlobalOptions> global = ParseGlobal(global_set, global_flags);
  if (!global.ok()) return usage_error(global.status(), help_command);

  absl::StatusOr<TlsCredentials> tls = TlsCredentials::Load(global->tls);
  if (!tls.ok()) return usage_error(tls.status(), help_command);
  ClientOptions client_options;
  if (tls->enabled()) client_options.channel_credentials = tls->Channel();
  client_options.coordinator = global->coordinator;
  client_options.admin_token = global->admin_token;
  client_options.timeout = absl::Milliseconds(global->timeout_ms);
  AdminClient client(client_options);
  Session session{*global, &client, &std::cout, &std::cerr};
  const absl::Status status = (*runner)(session);
  std::cout.flush();
  if (!status.ok()) {
    std::cerr << "emberctl: " << status << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace ember::ctl

int main(int argc, char** argv) { return ember::ctl::Main(argc, argv); }
