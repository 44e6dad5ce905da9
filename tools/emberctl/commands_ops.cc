// Copyright 2026 The Ember Authors.
//
// `checkpoint create|list|restore`, `checksum` and `audit`.

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/ps_client_cluster.h"
#include "common/slot_map.h"
#include "common/status_macros.h"
#include "tools/emberctl/cli.h"

namespace ember::ctl {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(250);

std::string Hex64(uint64_t v) { return absl::StrFormat("%016x", v); }

void DeclareJob(FlagSet& flags, std::string* job) {
  flags.String("job", job, "J", "the job").Required().NonEmpty();
}

// ---- checkpoint ----

struct CreateOptions {
  std::string job;
  int64_t wait_ms = 0;
};

void DeclareCheckpointCreate(FlagSet& flags, CreateOptions& o) {
  DeclareJob(flags, &o.job);
  flags.Number("wait_ms", &o.wait_ms, "N", "wait up to N ms for the checkpoint and print its name")
      .Min(0);
}

absl::StatusOr<Runner> FinishCheckpointCreate(const Args& args, const CreateOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([job = o.job, wait_ms = o.wait_ms](Session& s) -> absl::Status {
    std::string before;
    if (wait_ms > 0) {
      EMBER_ASSIGN_OR_RETURN(v1::GetJobResponse j, s.client->GetJob(job));
      before = j.latest_checkpoint();
    }
    EMBER_RETURN_IF_ERROR(s.client->RequestCheckpoint(job).status());
    std::optional<std::string> taken;
    if (wait_ms > 0) {
      const absl::Time deadline = absl::Now() + absl::Milliseconds(wait_ms);
      while (!taken.has_value()) {
        EMBER_ASSIGN_OR_RETURN(v1::GetJobResponse j, s.client->GetJob(job));
        if (j.latest_checkpoint() != before && !j.latest_checkpoint().empty()) {
          taken = j.latest_checkpoint();
        } else if (absl::Now() + kPollInterval > deadline) {
          return absl::DeadlineExceededError(
              absl::StrCat("job ", job, " took no checkpoint within ", wait_ms, " ms (phase ",
                           v1::GetJobResponse::Phase_Name(j.phase()),
                           "); the request stays pending until its workers reach a step barrier"));
        } else {
          absl::SleepFor(kPollInterval);
        }
      }
    }
    if (s.options.json) {
      JsonWriter j;
      j.BeginObject().Key("job").String(job).Key("requested").Bool(true).Key("checkpoint");
      taken.has_value() ? j.String(*taken) : j.Null();
      j.EndObject();
      PrintJson(s, j);
    } else if (taken.has_value()) {
      *s.out << "checkpoint " << *taken << "\n";
    } else {
      *s.out << "checkpoint requested for job " << job
             << "; its workers take it at their next step barrier\n";
    }
    return absl::OkStatus();
  });
}

void DeclareCheckpointList(FlagSet& flags, std::string& job) { DeclareJob(flags, &job); }

absl::StatusOr<Runner> FinishCheckpointList(const Args& args, const std::string& job) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([job](Session& s) -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(v1::ListCheckpointsResponse list, s.client->ListCheckpoints(job));
    if (s.options.json) {
      JsonWriter j;
      j.BeginObject().Key("job").String(job).Key("checkpoints").BeginArray();
      for (const v1::CheckpointSummary& c : list.checkpoints()) j.Proto(c);
      j.EndArray().EndObject();
      PrintJson(s, j);
      return absl::OkStatus();
    }
    TextTable t(
        {"NAME", "STEP", "ATTEMPT", "KIND", "PARENT", "CREATED", "BYTES", "SHARDS", "STATUS"});
    for (const v1::CheckpointSummary& c : list.checkpoints()) {
      t.AddRow({c.name(), absl::StrCat(c.step()), absl::StrCat(c.attempt()),
                c.incremental() ? "delta" : "full", c.parent().empty() ? "-" : c.parent(),
                c.created_unix_ms() == 0 ? "-" : UtcMicros(c.created_unix_ms() * 1000),
                HumanBytes(c.bytes()), absl::StrCat(c.shards()),
                c.error().empty() ? "ok" : absl::StrCat("corrupt: ", c.error())});
    }
    *s.out << t.Render();
    return absl::OkStatus();
  });
}

struct RestoreOptions {
  std::string job;
  std::string name;
};

void DeclareCheckpointRestore(FlagSet& flags, RestoreOptions& o) {
  DeclareJob(flags, &o.job);
  flags.String("name", &o.name, "N", "the checkpoint").DefaultText("the newest valid one");
}

absl::StatusOr<Runner> FinishCheckpointRestore(const Args& args, const RestoreOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([job = o.job, name = o.name](Session& s) -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(v1::RestoreCheckpointResponse r, s.client->RestoreCheckpoint(job, name));
    if (s.options.json) {
      JsonWriter j;
      j.BeginObject().Key("job").String(job).Key("restore").Proto(r).EndObject();
      PrintJson(s, j);
    } else {
      *s.out << "restored job " << job << " to " << r.name() << "; the shards serve attempt "
             << r.attempt() << "\n";
    }
    return absl::OkStatus();
  });
}

// ---- checksum ----

struct Digest {
  uint64_t rows = 0;
  uint64_t digest = 0;
};

// Per-table digests, total and per shard, of one cut: every shard that owns slots
// answered at the epoch of the map that named it.
struct ChecksumCut {
  uint64_t epoch = 0;
  std::map<std::string, Digest> total;
  std::map<std::string, std::map<uint32_t, Digest>> shards;
};

// One try: the map, then each owner's digests. `*consistent` is false when a shard
// answered at another epoch than the map's (a slot move switched meanwhile).
absl::StatusOr<ChecksumCut> TryChecksum(Session& s, const std::string& table,
                                        const std::string& job, bool* consistent,
                                        std::string* seen) {
  EMBER_ASSIGN_OR_RETURN(v1::GetClusterMapResponse map, s.client->GetClusterMap(job));
  if (map.epoch() == 0)
    return absl::FailedPreconditionError("slots are not assigned yet (epoch 0)");
  EMBER_ASSIGN_OR_RETURN(SlotMap slots, DecodeSlotOwners(map.slot_owners(), map.epoch()));
  std::map<uint32_t, std::string> address;
  for (const v1::ShardInfo& sh : map.shards()) address[sh.shard_id()] = sh.address();
  ChecksumCut cut;
  cut.epoch = map.epoch();
  *consistent = true;
  *seen = absl::StrCat("map epoch ", map.epoch());
  for (uint32_t id : slots.Shards()) {
    auto it = address.find(id);
    if (it == address.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("shard ", id, " owns slots but is not registered"));
    }
    absl::StatusOr<v1::ChecksumResponse> r = s.client->Checksum(it->second, table, job);
    if (!r.ok()) {
      return absl::Status(r.status().code(),
                          absl::StrCat("shard ", id, ": ", r.status().message()));
    }
    absl::StrAppend(seen, ", shard ", id, " at ", r->epoch());
    if (r->epoch() != map.epoch()) *consistent = false;
    for (const v1::ChecksumResponse::Table& t : r->tables()) {
      Digest& sum = cut.total[t.table()];
      sum.rows += t.rows();
      sum.digest += t.digest();  // mod 2^64: digests of disjoint row sets add up
      cut.shards[t.table()][id] = {t.rows(), t.digest()};
    }
  }
  return cut;
}

absl::Status RunChecksum(Session& s, const std::string& table, const std::string& job,
                         bool per_shard) {
  // While slots move, a shard may answer under a newer map than the one read (or an
  // older one): its slots would count twice or not at all. Ask again, with backoff,
  // for as long as --timeout_ms allows.
  const absl::Time give_up = absl::Now() + absl::Milliseconds(s.options.timeout_ms);
  absl::Duration backoff = absl::Milliseconds(20);
  ChecksumCut cut;
  while (true) {
    bool consistent = false;
    std::string seen;
    EMBER_ASSIGN_OR_RETURN(cut, TryChecksum(s, table, job, &consistent, &seen));
    if (consistent) break;
    if (absl::Now() + backoff >= give_up) {
      return absl::AbortedError(
          absl::StrCat("the slot map changed during every try (", seen,
                       "): slots are moving; run it again once the moves have switched"));
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
  const std::map<std::string, Digest>& total = cut.total;
  std::map<std::string, std::map<uint32_t, Digest>>& shards = cut.shards;
  const uint64_t epoch = cut.epoch;
  if (s.options.json) {
    JsonWriter j;
    j.BeginObject().Key("epoch").Uint(epoch).Key("tables").BeginArray();
    for (const auto& [name, d] : total) {
      j.BeginObject().Key("table").String(name).Key("rows").Uint(d.rows).Key("digest").String(
          Hex64(d.digest));
      if (per_shard) {
        j.Key("shards").BeginArray();
        for (const auto& [id, sd] : shards[name]) {
          j.BeginObject()
              .Key("shard_id")
              .Uint(id)
              .Key("rows")
              .Uint(sd.rows)
              .Key("digest")
              .String(Hex64(sd.digest))
              .EndObject();
        }
        j.EndArray();
      }
      j.EndObject();
    }
    j.EndArray().EndObject();
    PrintJson(s, j);
    return absl::OkStatus();
  }
  if (!per_shard) {
    TextTable t({"TABLE", "ROWS", "DIGEST"});
    for (const auto& [name, d] : total) t.AddRow({name, absl::StrCat(d.rows), Hex64(d.digest)});
    *s.out << t.Render();
    return absl::OkStatus();
  }
  TextTable t({"TABLE", "SHARD", "ROWS", "DIGEST"});
  for (const auto& [name, d] : total) {
    for (const auto& [id, sd] : shards[name]) {
      t.AddRow({name, absl::StrCat(id), absl::StrCat(sd.rows), Hex64(sd.digest)});
    }
    t.AddRow({name, "all", absl::StrCat(d.rows), Hex64(d.digest)});
  }
  *s.out << t.Render();
  return absl::OkStatus();
}

struct ChecksumOptions {
  std::string table;
  std::string job;
  bool per_shard = false;
};

void DeclareChecksum(FlagSet& flags, ChecksumOptions& o) {
  flags.String("table", &o.table, "T", "only this table").NonEmpty();
  flags.String("job", &o.job, "J", "job J's own tables (--own_tables); default: the shared ones")
      .NonEmpty();
  flags.Bool("per_shard", &o.per_shard, "also each shard's part");
}

absl::StatusOr<Runner> FinishChecksum(const Args& args, const ChecksumOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([o](Session& s) { return RunChecksum(s, o.table, o.job, o.per_shard); });
}

// ---- audit ----

struct AuditOptions {
  uint64_t after = 0;
  uint32_t limit = 0;  // 0: the coordinator's default (1000)
};

void DeclareAudit(FlagSet& flags, AuditOptions& o) {
  flags.Number("after", &o.after, "N", "entries with a sequence above N");
  flags.Number("limit", &o.limit, "N", "at most N entries").Range(1, 1000).DefaultText("1000");
}

absl::StatusOr<Runner> FinishAudit(const Args& args, const AuditOptions& o) {
  EMBER_RETURN_IF_ERROR(CheckPositionals(args, 0, 0, ""));
  return Runner([after = o.after, limit = o.limit](Session& s) -> absl::Status {
    EMBER_ASSIGN_OR_RETURN(v1::GetAuditLogResponse log, s.client->GetAuditLog(after, limit));
    if (s.options.json) {
      JsonWriter j;
      j.BeginObject().Key("entries").BeginArray();
      for (const v1::AuditEntry& e : log.entries()) j.Proto(e);
      j.EndArray().EndObject();
      PrintJson(s, j);
      return absl::OkStatus();
    }
    TextTable t({"SEQ", "TIME", "EPOCH", "WHO", "WHAT"});
    for (const v1::AuditEntry& e : log.entries()) {
      t.AddRow({absl::StrCat(e.sequence()), UtcMicros(e.unix_micros()),
                absl::StrCat(e.epoch_before(), " -> ", e.epoch_after()), e.who(), e.what()});
    }
    *s.out << t.Render();
    return absl::OkStatus();
  });
}

}  // namespace

std::vector<CommandSpec> CheckpointCommands() {
  return {
      Command("checkpoint", "create", "",
              "Asks job J's workers to checkpoint at their next step barrier.\n",
              DeclareCheckpointCreate, FinishCheckpointCreate),
      Command("checkpoint", "list", "",
              "Job J's checkpoints, oldest first, with their verification status.\n",
              DeclareCheckpointList, FinishCheckpointList),
      Command("checkpoint", "restore", "",
              "Rolls every shard back to a checkpoint of job J (the job must not be running).\n",
              DeclareCheckpointRestore, FinishCheckpointRestore),
      Command(nullptr, "checksum", "",
              "Per-table row count and digest summed over every shard that owns slots\n"
              "(comparable between clusters with different shard counts, restores and\n"
              "followers). A cut of one slot map: while slot moves switch it asks again\n"
              "until --timeout_ms, then fails ABORTED naming the epochs seen.\n",
              DeclareChecksum, FinishChecksum),
      Command(nullptr, "audit", "",
              "The coordinator's audit log: every cluster change with who, what and the epochs.\n",
              DeclareAudit, FinishAudit),
  };
}

}  // namespace ember::ctl
