// Copyright 2026 The Ember Authors.
//
// The files of an `emberctl export` directory, written and read here so that tests and
// other tools read an export exactly as emberctl writes it. docs/EXPORT_FORMAT.md is the
// reference for readers in other languages (with an example reader).
//
// An export holds the rows of one table, one file per PS shard:
//
//   DIR/rows-shard-<id>.bin   binary rows (--format=binary, the default)
//   DIR/rows-shard-<id>.tsv   text rows (--format=text)
//   DIR/positions.json        what was exported and, per shard, where the export ends on
//                             the shard's update stream (the next delta starts there)
//   DIR/_DONE                 written last (temp file + rename): the export is complete.
//                             A directory without it holds nothing a reader may use.
//
// A BASE export holds every stored row (puts only). A DELTA export holds, per shard,
// every row changed after the previous export's position (its current value: a put) and
// every row removed since (a tombstone). Apply a base, then each delta in order; within
// a file apply records in file order (an id may appear twice in a delta: the later
// record wins). Shards own disjoint rows, so shard files may be applied in any order.
//
// Slot moves: when a move gives a shard slots, its stream re-sends every row of those
// slots (ps.proto UpdateBatch.resync). A delta writes that as a kResyncBegin record, the
// rows as puts, and, when the shard says the rows were complete, a kResyncSweep record:
// every row of those slots (SlotOf(seed, id), common/slot.h) not put since the
// kResyncBegin no longer exists. ApplyRecords implements all of it.
//
// Binary rows file (every integer little-endian, floats IEEE binary32 little-endian):
//
//   header   magic "EMBEXPT1"       8 bytes
//            header_bytes   u32     bytes of the whole header (40 + table name)
//            kind           u8      1 base, 2 delta
//            reserved       u8      0
//            table_bytes    u16     length of the table name
//            shard_id       u32
//            dim            u32     floats of a put record's embedding
//            row_meta_bytes u32     the PS's stored row layout (server/store/row_layout.h):
//            state_floats   u32       RowMeta bytes, then dim floats, then state floats
//            seed           u64     the table's seed (slot of an id: SlotOf(seed, id))
//            table          table_bytes of UTF-8
//   records  id u64 | op u8 | put only: dim x f32 embedding
//            op: 1 put, 2 tombstone, 3 resync begin, 4 resync sweep; for 3 and 4 the
//            id field is the slot range (first << 32) | last
//   trailer  record_count u64 | crc32 u32 | "EXND"
//            crc32: zlib's (IEEE) over every byte before the trailer, header included
//
// Text rows file: one line per record, "<id>\tput\t<f0>,<f1>,...\n" (shortest decimal
// text that reads back as the same float), "<id>\tdelete\n", "<first>-<last>\tresync\n"
// or "<first>-<last>\tsweep\n".
//
//   absl::flat_hash_map<uint64_t, std::vector<float>> table;
//   EMBER_ASSIGN_OR_RETURN(ExportManifest m, ReadExportManifest(dir));
//   for (const ShardPosition& shard : m.shards) {
//     EMBER_ASSIGN_OR_RETURN(ExportFile f, ReadRowsFile(dir + "/" + shard.file, m.dim));
//     ApplyRecords(f.records, m.seed, &table);
//   }
//
// Thread-compatible.

#ifndef EMBER_TOOLS_EMBERCTL_EXPORT_FORMAT_H_
#define EMBER_TOOLS_EMBERCTL_EXPORT_FORMAT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "ember/v1/ps.pb.h"
#include "tools/emberctl/output.h"

namespace ember::ctl {

inline constexpr char kExportMagic[] = "EMBEXPT1";
inline constexpr char kExportTrailerMagic[] = "EXND";
inline constexpr char kPositionsFile[] = "positions.json";
inline constexpr char kDoneFile[] = "_DONE";

enum class ExportKind : uint8_t { kBase = 1, kDelta = 2 };
enum class ExportFormat { kBinary, kText };
enum class RecordOp : uint8_t { kPut = 1, kTombstone = 2, kResyncBegin = 3, kResyncSweep = 4 };

// "base" / "delta"; "binary" / "text".
const char* KindName(ExportKind kind);
const char* FormatName(ExportFormat format);

// "rows-shard-3.bin" (binary) or "rows-shard-3.tsv" (text).
std::string RowsFileName(uint32_t shard_id, ExportFormat format);

// What a binary rows file's header says. A text file has no header: its reader fills
// in only `dim` (from the records).
struct ExportHeader {
  ExportKind kind = ExportKind::kBase;
  std::string table;
  uint32_t shard_id = 0;
  uint32_t dim = 0;
  uint32_t row_meta_bytes = 0;
  uint32_t state_floats = 0;
  uint64_t seed = 0;
};

struct ExportRecord {
  uint64_t id = 0;  // resync records: the slot range, SlotRangeId(first, last)
  RecordOp op = RecordOp::kPut;
  std::vector<float> embedding;  // dim floats for a put; empty otherwise
};

constexpr uint64_t SlotRangeId(uint32_t first_slot, uint32_t last_slot) {
  return (uint64_t{first_slot} << 32) | last_slot;
}
inline uint32_t FirstSlot(const ExportRecord& r) { return static_cast<uint32_t>(r.id >> 32); }
inline uint32_t LastSlot(const ExportRecord& r) { return static_cast<uint32_t>(r.id); }

// Writes one rows file. Records are buffered and written in large pieces; nothing is
// complete until Finish returns OK. IO errors are UNAVAILABLE naming the file.
class ExportFileWriter {
 public:
  // Creates (or truncates) `path` and writes the header (binary format).
  static absl::StatusOr<std::unique_ptr<ExportFileWriter>> Create(const std::string& path,
                                                                  ExportFormat format,
                                                                  const ExportHeader& header);
  ~ExportFileWriter();
  ExportFileWriter(const ExportFileWriter&) = delete;
  ExportFileWriter& operator=(const ExportFileWriter&) = delete;

  // REQUIRES: embedding.size() == header.dim.
  absl::Status Put(uint64_t id, absl::Span<const float> embedding);
  absl::Status Tombstone(uint64_t id);
  // The slot resync records (see the top of this file).
  absl::Status ResyncBegin(uint32_t first_slot, uint32_t last_slot);
  absl::Status ResyncSweep(uint32_t first_slot, uint32_t last_slot);
  // Every row of `block` (ps.proto RowBlock: whole stored rows): a put of the row's
  // embedding, or a tombstone for a row of length 0. INVALID_ARGUMENT, before anything
  // of the block is written, for a malformed block or a row whose length is not the
  // header's layout (RowMeta + (dim + state_floats) floats).
  absl::Status AddStoredRows(const v1::RowBlock& block);
  // Writes the trailer (binary), then flushes, fsyncs and closes the file.
  absl::Status Finish();

  uint64_t records() const { return records_; }
  uint64_t tombstones() const { return tombstones_; }
  uint64_t sweeps() const { return sweeps_; }

 private:
  ExportFileWriter(std::string path, ExportFormat format, ExportHeader header, int fd);
  absl::Status Write(uint64_t id, RecordOp op, absl::Span<const float> embedding);
  absl::Status Flush();
  absl::Status MaybeFlush();

  const std::string path_;
  const ExportFormat format_;
  const ExportHeader header_;
  int fd_;
  std::string buffer_;
  uint32_t crc_ = 0;  // running crc32 of every byte written so far (binary)
  uint64_t records_ = 0;
  uint64_t tombstones_ = 0;
  uint64_t sweeps_ = 0;
};

struct ExportFile {
  ExportHeader header;
  std::vector<ExportRecord> records;
};

// Applies `records` (of one file, in order) to `table` (id -> embedding) as a serving
// system should: puts, tombstones, and resync sweeps of the table with `seed`.
void ApplyRecords(absl::Span<const ExportRecord> records, uint64_t seed,
                  absl::flat_hash_map<uint64_t, std::vector<float>>* table);

// Reads a rows file: text when `path` ends in ".tsv", else binary. A binary file must
// have a well-formed header, whole records, a trailer whose count and crc32 match, and
// `dim` (unless 0) in its header; a text file must have well-formed lines with `dim`
// floats per put (unless dim is 0: then every put has as many as the first).
// DATA_LOSS naming the file and the place otherwise; UNAVAILABLE for IO errors.
absl::StatusOr<ExportFile> ReadRowsFile(const std::string& path, uint32_t dim = 0);

// Per shard, in positions.json.
struct ShardPosition {
  uint32_t shard_id = 0;
  std::string address;
  uint64_t stream_id = 0;  // the shard's update stream (ps.proto WatchUpdatesRequest)
  uint64_t version = 0;    // the export holds every change of the stream through here
  uint64_t records = 0;    // in the shard's rows file (of every kind)
  uint64_t tombstones = 0;
  uint64_t sweeps = 0;  // kResyncSweep records (slot moves to the shard)
  std::string file;     // the rows file's name in the directory
};

// positions.json.
struct ExportManifest {
  std::string table;
  std::string job;  // the table is this job's own (--job); empty: a shared table
  ExportKind kind = ExportKind::kBase;
  ExportFormat format = ExportFormat::kBinary;
  uint32_t dim = 0;
  uint32_t row_meta_bytes = 0;
  uint32_t state_floats = 0;
  uint64_t seed = 0;
  std::string since_dir;                  // delta --since=DIR: DIR as given
  std::optional<uint64_t> since_version;  // delta --since=VERSION
  std::vector<ShardPosition> shards;      // ascending shard_id
};

// Writes the manifest's keys and values (not the braces) into the open object of `j`.
// stream_id and seed are strings of decimal digits: 64-bit numbers that JSON readers
// using doubles (jq, JavaScript) would round.
void AppendManifestFields(const ExportManifest& manifest, JsonWriter* j);
// positions.json's text: one JSON object of AppendManifestFields and a newline.
std::string ManifestJson(const ExportManifest& manifest);
// INVALID_ARGUMENT (naming the field) for text that is not such an object.
absl::StatusOr<ExportManifest> ParseManifestJson(absl::string_view text);

// The manifest of the finished export in `dir`: FAILED_PRECONDITION when `dir` has no
// _DONE (no export, or an unfinished one); otherwise as ParseManifestJson, or
// UNAVAILABLE for IO errors.
absl::StatusOr<ExportManifest> ReadExportManifest(const std::string& dir);

// Writes `contents` to `path` and fsyncs it. UNAVAILABLE naming the file on error.
absl::Status WriteFileSynced(const std::string& path, absl::string_view contents);
// Writes DIR/_DONE atomically (DIR/_DONE.tmp, fsync, rename, fsync of DIR).
absl::Status WriteDoneMarker(const std::string& dir, absl::string_view contents);

}  // namespace ember::ctl

#endif  // EMBER_TOOLS_EMBERCTL_EXPORT_FORMAT_H_
