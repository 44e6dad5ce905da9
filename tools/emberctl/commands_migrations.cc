// Copyright 2026 The Ember Authors.
//
// `migrations list|show|cancel|wait`.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/slot_ranges.h"
#include "common/status_macros.h"
#include "tools/emberctl/cli.h"
#include "tools/emberctl/migrate.h"

namespace ember::ctl {
namespace {

constexpr size_t kRangeChars = 60;

void PrintMigration(Session& s, const v1::Migration& m) {
  if (s.options.json) {
    JsonWriter j;
    j.BeginObject().Key("migration").Proto(m).EndObject();
    PrintJson(s, j);
    return;
  }
  std::string out = SummaryText(m);
  if (m.started_unix_ms() != 0) {
    absl::StrAppend(&out, "  started       ", UtcMicros(m.started_unix_ms() * 1000), "\n");
  }
  TextTable t({"MOVE", "SOURCE", "TARGET", "SLOTS", "RANGES", "WEIGHT", "STATE"});
  for (int i = 0; i < m.spec().moves_size(); ++i) {
    const v1::SlotMove& mv = m.spec().moves(i);
    std::string state = "pending";
    if (static_cast<uint32_t>(i) < m.moves_done()) {
      state = "done";
    } else if (static_cast<uint32_t>(i) == m.move() && !Finished(m.phase())) {
      state = PhaseName(m.phase());
    }
    t.AddRow({absl::StrCat(i + 1), absl::StrCat(mv.source()), absl::StrCat(mv.target()),
              absl::StrCat(CountSlots(mv.ranges())), FormatRanges(mv.ranges(), kRangeChars),
              absl::StrCat(mv.weight()), state});
  }
  if (!t.empty()) out += "\n" + t.Render();
  *s.out << out;
}

absl::StatusOr<Runner> FinishList(const Args& args, const NoFlags&) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([](Session& s) -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(v1::ListMigrationsResponse list, s.client->ListMigrations());
    if (s.options.json) {
      JsonWriter j;
      j.BeginObject().Key("migrations").BeginArray();
      for (const v1::Migration& m : list.migrations()) j.Proto(m);
      j.EndArray().EndObject();
      PrintJson(s, j);
      return absl::OkStatus();
    }
    TextTable t({"OP", "PHASE", "MOVES", "ROWS", "BYTES", "SECONDS", "STARTED", "REASON"});
    for (const v1::Migration& m : list.migrations()) {
      t.AddRow({m.op_id(), PhaseName(m.phase()),
                absl::StrCat(m.moves_done(), "/", m.spec().moves_size()),
                absl::StrCat(m.rows_copied()), HumanBytes(m.bytes_copied()), Fixed(m.seconds(), 1),
                m.started_unix_ms() == 0 ? "-" : UtcMicros(m.started_unix_ms() * 1000),
                m.spec().reason().empty() ? "-" : m.spec().reason()});
    }
    *s.out << t.Render();
    return absl::OkStatus();
  });
}

absl::StatusOr<Runner> FinishShow(const Args& args, const NoFlags&) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 1, ""));
  const std::string op = args.positionals.empty() ? "" : std::string(args.positionals[0]);
  return Runner([op](Session& s) -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(v1::Migration m, s.client->GetMigration(op));
    PrintMigration(s, m);
    return absl::OkStatus();
  });
}

absl::StatusOr<Runner> FinishCancel(const Args& args, const NoFlags&) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 1, 1, "an OP id"));
  return Runner([op = std::string(args.positionals[0])](Session& s) -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(v1::Migration m, s.client->CancelMigration(op));
    if (!s.options.json && !Finished(m.phase())) {
      *s.out << "cancel requested: the current move rolls back unless it already switched; "
                "`emberctl migrations wait "
             << m.op_id() << "` follows it\n";
    }
    PrintMigration(s, m);
    return absl::OkStatus();
  });
}

absl::StatusOr<Runner> FinishWait(const Args& args, const NoFlags&) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 1, 1, "an OP id"));
  return Runner([op = std::string(args.positionals[0])](Session& s) -> absl::Status {
    InterruptScope scope;
    EMBER_ASSIGN_OR_RETURN(v1::Migration m, Follow(s, op));
    if (s.options.json) {
      JsonWriter j;
      j.BeginObject().Key("migration").Proto(m).EndObject();
      PrintJson(s, j);
    } else {
      *s.out << SummaryText(m);
    }
    return Outcome(m);
  });
}

void DeclareResume(FlagSet& flags, MigrateFlags& o) {
  flags.Bool("detach", &o.detach, "start it and return at once");
}

absl::StatusOr<Runner> FinishResume(const Args& args, const MigrateFlags& flags) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 1, 1, "an OP id"));
  return Runner([op = std::string(args.positionals[0]), flags](Session& s) -> absl::Status {
    // StartMigration with the stored spec attaches to the operation (resuming it
    // when FAILED); the coordinator may have split the moves the operator gave.
    EMBER_ASSIGN_OR_RETURN(v1::Migration m, s.client->GetMigration(op));
    if (m.phase() == v1::Migration::DONE || m.phase() == v1::Migration::CANCELLED) {
      return absl::FailedPreconditionError(
          absl::StrCat("migration ", op, " is ", PhaseName(m.phase()), "; nothing to resume"));
    }
    return StartAndReport(s, m.spec(), flags, nullptr);
  });
}

}  // namespace

std::vector<CommandSpec> MigrationCommands() {
  return {
      Command("migrations", "list", "", "Migrations, newest first (at most 100).\n", DeclareNoFlags,
              FinishList),
      Command("migrations", "show", "[OP]",
              "One migration with its moves; without OP the newest.\n", DeclareNoFlags, FinishShow),
      Command("migrations", "cancel", "OP",
              "Stops migration OP: the current move rolls back unless it already switched;\n"
              "moves already switched stay.\n",
              DeclareNoFlags, FinishCancel),
      Command("migrations", "wait", "OP",
              "Follows migration OP until it ends (progress on stderr); exit 1 if it ends\n"
              "FAILED or CANCELLED. Ctrl-C stops following, not the migration.\n",
              DeclareNoFlags, FinishWait),
      Command("migrations", "resume", "OP",
              "Resumes a FAILED migration (StartMigration with its stored spec) and follows it.\n",
              DeclareResume, FinishResume),
  };
}

}  // namespace ember::ctl
