// Copyright 2026 The Ember Authors.

#include "tools/emberctl/export_format.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/slot.h"
#include "common/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "server/shared/row_block.h"
#include "server/store/row_layout.h"
#include "tools/emberctl/output.h"

namespace ember::ctl {
namespace {

constexpr size_t kMagicBytes = 8;
constexpr size_t kFixedHeaderBytes = 40;
constexpr size_t kTrailerBytes = 16;
constexpr size_t kFlushBytes = 4 << 20;

absl::Status IoError(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

absl::Status Corrupt(const std::string& path, absl::string_view why) {
  return absl::DataLossError(absl::StrCat(path, ": ", why));
}

template <typename T>
void PutLe(T value, std::string* out) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));  // little-endian host
}

template <typename T>
T GetLe(const char* p) {
  T value;
  std::memcpy(&value, p, sizeof(value));
  return value;
}

uint32_t Crc32(uint32_t crc, const char* data, size_t size) {
  while (size > 0) {  // zlib takes uInt lengths
    const size_t n = std::min<size_t>(size, size_t{1} << 30);
    crc = static_cast<uint32_t>(
        crc32(crc, reinterpret_cast<const Bytef*>(data), static_cast<uInt>(n)));
    data += n;
    size -= n;
  }
  return crc;
}

absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError("write", path);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("open", path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return IoError("read", path);
  return std::move(buffer).str();
}

absl::StatusOr<ExportFile> ReadBinary(const std::string& path, const std::string& bytes,
                                      uint32_t dim) {
  if (bytes.size() < kFixedHeaderBytes + kTrailerBytes ||
      bytes.compare(0, kMagicBytes, kExportMagic) != 0) {
    return Corrupt(path, "not an export rows file (no EMBEXPT1 header)");
  }
  ExportFile file;
  ExportHeader& h = file.header;
  const uint32_t header_bytes = GetLe<uint32_t>(&bytes[8]);
  const uint8_t kind = static_cast<uint8_t>(bytes[12]);
  const uint16_t table_bytes = GetLe<uint16_t>(&bytes[14]);
  h.shard_id = GetLe<uint32_t>(&bytes[16]);
  h.dim = GetLe<uint32_t>(&bytes[20]);
  h.row_meta_bytes = GetLe<uint32_t>(&bytes[24]);
  h.state_floats = GetLe<uint32_t>(&bytes[28]);
  h.seed = GetLe<uint64_t>(&bytes[32]);
  if (header_bytes != kFixedHeaderBytes + table_bytes ||
      header_bytes + kTrailerBytes > bytes.size()) {
    return Corrupt(path, absl::StrCat("bad header size ", header_bytes));
  }
  if (kind != static_cast<uint8_t>(ExportKind::kBase) &&
      kind != static_cast<uint8_t>(ExportKind::kDelta)) {
    return Corrupt(path, absl::StrCat("unknown kind ", static_cast<int>(kind)));
  }
  h.kind = static_cast<ExportKind>(kind);
  if (dim != 0 && h.dim != dim) {
    return Corrupt(path, absl::StrCat("dim ", h.dim, ", the export says ", dim));
  }
  h.table = bytes.substr(kFixedHeaderBytes, table_bytes);

  const size_t end = bytes.size() - kTrailerBytes;
  const uint64_t count = GetLe<uint64_t>(&bytes[end]);
  const uint32_t crc = GetLe<uint32_t>(&bytes[end + 8]);
  if (bytes.compare(end + 12, 4, kExportTrailerMagic) != 0) {
    return Corrupt(path, "no trailer (truncated?)");
  }
  if (Crc32(0, bytes.data(), end) != crc) {
    return Corrupt(path, "crc32 of the header and records does not match the trailer");
  }
  const size_t put_bytes = size_t{h.dim} * sizeof(float);
  for (size_t at = header_bytes; at < end;) {
    if (end - at < sizeof(uint64_t) + 1)
      return Corrupt(path, absl::StrCat("truncated record at byte ", at));
    ExportRecord r;
    r.id = GetLe<uint64_t>(&bytes[at]);
    const uint8_t op = static_cast<uint8_t>(bytes[at + 8]);
    at += sizeof(uint64_t) + 1;
    if (op == static_cast<uint8_t>(RecordOp::kTombstone) ||
        op == static_cast<uint8_t>(RecordOp::kResyncBegin) ||
        op == static_cast<uint8_t>(RecordOp::kResyncSweep)) {
      r.op = static_cast<RecordOp>(op);
    } else if (op == static_cast<uint8_t>(RecordOp::kPut) && end - at >= put_bytes) {
      r.embedding.resize(h.dim);
      std::memcpy(r.embedding.data(), &bytes[at], put_bytes);
      at += put_bytes;
    } else {
      return Corrupt(path, absl::StrCat("bad record ", file.records.size(), " (op ",
                                        static_cast<int>(op), ")"));
    }
    file.records.push_back(std::move(r));
  }
  if (file.records.size() != count) {
    return Corrupt(path, absl::StrCat(file.records.size(), " records, the trailer says ", count));
  }
  return file;
}

absl::StatusOr<ExportFile> ReadText(const std::string& path, const std::string& text,
                                    uint32_t dim) {
  ExportFile file;
  file.header.dim = dim;
  size_t line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    ++line_no;
    auto bad = [&](absl::string_view why) {
      return Corrupt(path, absl::StrCat("line ", line_no, ": ", why));
    };
    const std::vector<absl::string_view> cells = absl::StrSplit(line, '\t');
    ExportRecord r;
    if (cells.size() == 2 && (cells[1] == "resync" || cells[1] == "sweep")) {
      const std::pair<absl::string_view, absl::string_view> range =
          absl::StrSplit(cells[0], absl::MaxSplits('-', 1));
      uint32_t first = 0, last = 0;
      if (!absl::SimpleAtoi(range.first, &first) || !absl::SimpleAtoi(range.second, &last)) {
        return bad("bad slot range");
      }
      r.id = SlotRangeId(first, last);
      r.op = cells[1] == "resync" ? RecordOp::kResyncBegin : RecordOp::kResyncSweep;
      file.records.push_back(std::move(r));
      continue;
    }
    if (cells.size() < 2 || !absl::SimpleAtoi(cells[0], &r.id)) return bad("bad id");
    if (cells[1] == "delete" && cells.size() == 2) {
      r.op = RecordOp::kTombstone;
    } else if (cells[1] == "put" && cells.size() == 3) {
      for (absl::string_view v : absl::StrSplit(cells[2], ',')) {
        float f = 0;
        const auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), f);
        if (v.empty() || ec != std::errc() || ptr != v.data() + v.size()) {
          return bad(absl::StrCat("bad float '", v, "'"));
        }
        r.embedding.push_back(f);
      }
      if (file.header.dim == 0) file.header.dim = static_cast<uint32_t>(r.embedding.size());
      if (r.embedding.size() != file.header.dim) {
        return bad(absl::StrCat(r.embedding.size(), " floats, expected ", file.header.dim));
      }
    } else {
      return bad("expected <id> put <floats>, <id> delete, <range> resync or <range> sweep");
    }
    file.records.push_back(std::move(r));
  }
  return file;
}

// ---- positions.json through google.protobuf.Struct (no JSON library is installed) ----

using google::protobuf::Struct;
using google::protobuf::Value;

absl::StatusOr<const Value*> Field(const Struct& s, const std::string& key, Value::KindCase kind) {
  const auto it = s.fields().find(key);
  if (it == s.fields().end() || it->second.kind_case() != kind) {
    return absl::InvalidArgumentError(
        absl::StrCat("positions.json: missing or mistyped '", key, "'"));
  }
  return &it->second;
}

template <typename T>
absl::Status Number(const Struct& s, const std::string& key, T* out) {
  EMBER_ASSIGN_OR_RETURN(const Value* v, Field(s, key, Value::kNumberValue));
  const double d = v->number_value();
  if (!(d >= 0) || d > 9007199254740992.0 || std::floor(d) != d ||
      d > static_cast<double>(std::numeric_limits<T>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("positions.json: bad '", key, "'"));
  }
  *out = static_cast<T>(d);
  return absl::OkStatus();
}

absl::Status Text(const Struct& s, const std::string& key, std::string* out) {
  EMBER_ASSIGN_OR_RETURN(const Value* v, Field(s, key, Value::kStringValue));
  *out = v->string_value();
  return absl::OkStatus();
}

// A u64 written as a string of decimal digits (JSON doubles would round it).
absl::Status DecimalText(const Struct& s, const std::string& key, uint64_t* out) {
  std::string text;
  EMBER_RETURN_IF_ERROR(Text(s, key, &text));
  if (!absl::SimpleAtoi(text, out)) {
    return absl::InvalidArgumentError(absl::StrCat("positions.json: bad ", key, " '", text, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardPosition> ParseShard(const Value& value) {
  if (value.kind_case() != Value::kStructValue) {
    return absl::InvalidArgumentError("positions.json: a shard is not an object");
  }
  const Struct& s = value.struct_value();
  ShardPosition p;
  EMBER_RETURN_IF_ERROR(Number(s, "shard_id", &p.shard_id));
  EMBER_RETURN_IF_ERROR(Text(s, "address", &p.address));
  EMBER_RETURN_IF_ERROR(DecimalText(s, "stream_id", &p.stream_id));
  EMBER_RETURN_IF_ERROR(Number(s, "version", &p.version));
  EMBER_RETURN_IF_ERROR(Number(s, "records", &p.records));
  EMBER_RETURN_IF_ERROR(Number(s, "tombstones", &p.tombstones));
  EMBER_RETURN_IF_ERROR(Number(s, "sweeps", &p.sweeps));
  EMBER_RETURN_IF_ERROR(Text(s, "file", &p.file));
  return p;
}

}  // namespace

const char* KindName(ExportKind kind) { return kind == ExportKind::kBase ? "base" : "delta"; }
const char* FormatName(ExportFormat format) {
  return format == ExportFormat::kBinary ? "binary" : "text";
}

std::string RowsFileName(uint32_t shard_id, ExportFormat format) {
  return absl::StrCat("rows-shard-", shard_id, format == ExportFormat::kBinary ? ".bin" : ".tsv");
}

// ---- ExportFileWriter ----

ExportFileWriter::ExportFileWriter(std::string path, ExportFormat format, ExportHeader header,
                                   int fd)
    : path_(std::move(path)), format_(format), header_(std::move(header)), fd_(fd) {}

ExportFileWriter::~ExportFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<std::unique_ptr<ExportFileWriter>> ExportFileWriter::Create(
    const std::string& path, ExportFormat format, const ExportHeader& header) {
  if (header.table.size() > UINT16_MAX) return absl::InvalidArgumentError("table name too long");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("create", path);
  std::unique_ptr<ExportFileWriter> w(new ExportFileWriter(path, format, header, fd));
  if (format == ExportFormat::kBinary) {
    std::string& b = w->buffer_;
    b.append(kExportMagic, kMagicBytes);
    PutLe(static_cast<uint32_t>(kFixedHeaderBytes + header.table.size()), &b);
    PutLe(static_cast<uint8_t>(header.kind), &b);
    PutLe(uint8_t{0}, &b);
    PutLe(static_cast<uint16_t>(header.table.size()), &b);
    PutLe(header.shard_id, &b);
    PutLe(header.dim, &b);
    PutLe(header.row_meta_bytes, &b);
    PutLe(header.state_floats, &b);
    PutLe(header.seed, &b);
    b += header.table;
    w->crc_ = Crc32(0, b.data(), b.size());
  }
  return w;
}

absl::Status ExportFileWriter::Flush() {
  EMBER_RETURN_IF_ERROR(WriteAll(fd_, buffer_, path_));
  buffer_.clear();
  return absl::OkStatus();
}

absl::Status ExportFileWriter::MaybeFlush() {
  return buffer_.size() >= kFlushBytes ? Flush() : absl::OkStatus();
}

absl::Status ExportFileWriter::Write(uint64_t id, RecordOp op, absl::Span<const float> embedding) {
  ++records_;
  if (format_ == ExportFormat::kText) {
    switch (op) {
      case RecordOp::kPut:
        absl::StrAppend(&buffer_, id, "\tput\t");
        for (size_t i = 0; i < embedding.size(); ++i) {
          absl::StrAppend(&buffer_, i == 0 ? "" : ",", FloatText(embedding[i]));
        }
        buffer_ += '\n';
        break;
      case RecordOp::kTombstone:
        absl::StrAppend(&buffer_, id, "\tdelete\n");
        break;
      case RecordOp::kResyncBegin:
      case RecordOp::kResyncSweep:
        absl::StrAppend(&buffer_, id >> 32, "-", id & 0xffffffffu,
                        op == RecordOp::kResyncBegin ? "\tresync\n" : "\tsweep\n");
        break;
    }
    return MaybeFlush();
  }
  const size_t start = buffer_.size();
  PutLe(id, &buffer_);
  PutLe(static_cast<uint8_t>(op), &buffer_);
  buffer_.append(reinterpret_cast<const char*>(embedding.data()), embedding.size() * sizeof(float));
  crc_ = Crc32(crc_, buffer_.data() + start, buffer_.size() - start);
  return MaybeFlush();
}

absl::Status ExportFileWriter::Put(uint64_t id, absl::Span<const float> embedding) {
  if (embedding.size() != header_.dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("put of ", embedding.size(), " floats into a file of dim ", header_.dim));
  }
  return Write(id, RecordOp::kPut, embedding);
}

absl::Status ExportFileWriter::Tombstone(uint64_t id) {
  ++tombstones_;
  return Write(id, RecordOp::kTombstone, {});
}

absl::Status ExportFileWriter::ResyncBegin(uint32_t first_slot, uint32_t last_slot) {
  return Write(SlotRangeId(first_slot, last_slot), RecordOp::kResyncBegin, {});
}

absl::Status ExportFileWriter::ResyncSweep(uint32_t first_slot, uint32_t last_slot) {
  ++sweeps_;
  return Write(SlotRangeId(first_slot, last_slot), RecordOp::kResyncSweep, {});
}

absl::Status ExportFileWriter::AddStoredRows(const v1::RowBlock& block) {
  EMBER_ASSIGN_OR_RETURN(const std::vector<EncodedRow> rows, DecodeRows(block));
  const size_t row_bytes =
      header_.row_meta_bytes + (size_t{header_.dim} + header_.state_floats) * sizeof(float);
  for (const EncodedRow& row : rows) {
    if (!row.value.empty() && row.value.size() != row_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("row ", row.id, " of table '", block.table(),
                                                     "' has ", row.value.size(),
                                                     " bytes; the table's layout has ", row_bytes));
    }
  }
  std::vector<float> embedding(header_.dim);
  for (const EncodedRow& row : rows) {
    if (row.value.empty()) {
      EMBER_RETURN_IF_ERROR(Tombstone(row.id));
      continue;
    }
    std::memcpy(embedding.data(), row.value.data() + header_.row_meta_bytes,
                embedding.size() * sizeof(float));
    EMBER_RETURN_IF_ERROR(Put(row.id, embedding));
  }
  return absl::OkStatus();
}

absl::Status ExportFileWriter::Finish() {
  if (format_ == ExportFormat::kBinary) {
    PutLe(records_, &buffer_);
    PutLe(crc_, &buffer_);
    buffer_.append(kExportTrailerMagic, 4);
  }
  EMBER_RETURN_IF_ERROR(Flush());
  if (::fsync(fd_) != 0) return IoError("fsync", path_);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return IoError("close", path_);
  return absl::OkStatus();
}

void ApplyRecords(absl::Span<const ExportRecord> records, uint64_t seed,
                  absl::flat_hash_map<uint64_t, std::vector<float>>* table) {
  bool in_resync = false;
  absl::flat_hash_set<uint64_t> resynced;  // ids put since the kResyncBegin
  for (const ExportRecord& r : records) {
    switch (r.op) {
      case RecordOp::kPut:
        (*table)[r.id] = r.embedding;
        if (in_resync) resynced.insert(r.id);
        break;
      case RecordOp::kTombstone:
        table->erase(r.id);
        break;
      case RecordOp::kResyncBegin:
        in_resync = true;
        resynced.clear();
        break;
      case RecordOp::kResyncSweep:
        absl::erase_if(*table, [&](const auto& row) {
          const uint32_t slot = SlotOf(seed, row.first);
          return slot >= FirstSlot(r) && slot <= LastSlot(r) && !resynced.contains(row.first);
        });
        in_resync = false;
        resynced.clear();
        break;
    }
  }
}

// ---- Readers ----

absl::StatusOr<ExportFile> ReadRowsFile(const std::string& path, uint32_t dim) {
  EMBER_ASSIGN_OR_RETURN(const std::string bytes, ReadWholeFile(path));
  if (absl::EndsWith(path, ".tsv")) return ReadText(path, bytes, dim);
  return ReadBinary(path, bytes, dim);
}

void AppendManifestFields(const ExportManifest& m, JsonWriter* out) {
  JsonWriter& j = *out;
  j.Key("format")
      .String(kExportMagic)
      .Key("table")
      .String(m.table)
      .Key("job")
      .String(m.job)
      .Key("kind")
      .String(KindName(m.kind))
      .Key("file_format")
      .String(FormatName(m.format))
      .Key("dim")
      .Uint(m.dim)
      .Key("row_meta_bytes")
      .Uint(m.row_meta_bytes)
      .Key("state_floats")
      .Uint(m.state_floats)
      .Key("seed")
      .String(absl::StrCat(m.seed))
      .Key("since_dir");
  m.since_dir.empty() ? j.Null() : j.String(m.since_dir);
  j.Key("since_version");
  m.since_version.has_value() ? j.Uint(*m.since_version) : j.Null();
  j.Key("shards").BeginArray();
  for (const ShardPosition& p : m.shards) {
    j.BeginObject()
        .Key("shard_id")
        .Uint(p.shard_id)
        .Key("address")
        .String(p.address)
        .Key("stream_id")
        .String(absl::StrCat(p.stream_id))
        .Key("version")
        .Uint(p.version)
        .Key("records")
        .Uint(p.records)
        .Key("tombstones")
        .Uint(p.tombstones)
        .Key("sweeps")
        .Uint(p.sweeps)
        .Key("file")
        .String(p.file)
        .EndObject();
  }
  j.EndArray();
}

std::string ManifestJson(const ExportManifest& manifest) {
  JsonWriter j;
  j.BeginObject();
  AppendManifestFields(manifest, &j);
  j.EndObject();
  return j.str() + "\n";
}

absl::StatusOr<ExportManifest> ParseManifestJson(absl::string_view text) {
  Struct root;
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(text.data(), text.size()), &root);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("positions.json: ", parsed.ToString()));
  }
  ExportManifest m;
  std::string magic, kind, format;
  EMBER_RETURN_IF_ERROR(Text(root, "format", &magic));
  if (magic != kExportMagic) {
    return absl::InvalidArgumentError(absl::StrCat("positions.json: format '", magic, "'"));
  }
  EMBER_RETURN_IF_ERROR(Text(root, "table", &m.table));
  // Absent in exports before 2026-12-08: a shared table.
  if (Field(root, "job", Value::kStringValue).ok()) {
    EMBER_RETURN_IF_ERROR(Text(root, "job", &m.job));
  }
  EMBER_RETURN_IF_ERROR(Text(root, "kind", &kind));
  EMBER_RETURN_IF_ERROR(Text(root, "file_format", &format));
  if ((kind != "base" && kind != "delta") || (format != "binary" && format != "text")) {
    return absl::InvalidArgumentError("positions.json: bad kind or file_format");
  }
  m.kind = kind == "base" ? ExportKind::kBase : ExportKind::kDelta;
  m.format = format == "binary" ? ExportFormat::kBinary : ExportFormat::kText;
  EMBER_RETURN_IF_ERROR(Number(root, "dim", &m.dim));
  EMBER_RETURN_IF_ERROR(Number(root, "row_meta_bytes", &m.row_meta_bytes));
  EMBER_RETURN_IF_ERROR(Number(root, "state_floats", &m.state_floats));
  EMBER_RETURN_IF_ERROR(DecimalText(root, "seed", &m.seed));
  if (Field(root, "since_dir", Value::kStringValue).ok()) {
    EMBER_RETURN_IF_ERROR(Text(root, "since_dir", &m.since_dir));
  }
  if (Field(root, "since_version", Value::kNumberValue).ok()) {
    uint64_t v = 0;
    EMBER_RETURN_IF_ERROR(Number(root, "since_version", &v));
    m.since_version = v;
  }
  EMBER_ASSIGN_OR_RETURN(const Value* shards, Field(root, "shards", Value::kListValue));
  for (const Value& v : shards->list_value().values()) {
    EMBER_ASSIGN_OR_RETURN(ShardPosition p, ParseShard(v));
    m.shards.push_back(std::move(p));
  }
  return m;
}

absl::StatusOr<ExportManifest> ReadExportManifest(const std::string& dir) {
  const std::string done = absl::StrCat(dir, "/", kDoneFile);
  if (::access(done.c_str(), F_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " is not a finished export (it has no ", kDoneFile, ")"));
  }
  const std::string path = absl::StrCat(dir, "/", kPositionsFile);
  EMBER_ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path));
  absl::StatusOr<ExportManifest> m = ParseManifestJson(text);
  if (!m.ok()) return absl::Status(m.status().code(), absl::StrCat(dir, "/", m.status().message()));
  return m;
}

// ---- Files ----

absl::Status WriteFileSynced(const std::string& path, absl::string_view contents) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("create", path);
  absl::Status s = WriteAll(fd, contents, path);
  if (s.ok() && ::fsync(fd) != 0) s = IoError("fsync", path);
  if (::close(fd) != 0 && s.ok()) s = IoError("close", path);
  return s;
}

absl::Status WriteDoneMarker(const std::string& dir, absl::string_view contents) {
  const std::string temp = absl::StrCat(dir, "/", kDoneFile, ".tmp");
  const std::string done = absl::StrCat(dir, "/", kDoneFile);
  EMBER_RETURN_IF_ERROR(WriteFileSynced(temp, contents));
  if (::rename(temp.c_str(), done.c_str()) != 0) return IoError("rename to", done);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError("open", dir);
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  return synced ? absl::OkStatus() : IoError("fsync", dir);
}

}  // namespace ember::ctl
