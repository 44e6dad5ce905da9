// Copyright 2026 The Ember Authors.

#include "worker/data/reader.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/line_parser.h"
#include "common/model/model_config.h"
#include "common/status_macros.h"
#include "worker/data/file_source.h"

namespace ember::worker {
namespace {

// The malformed fraction is checked once a partition has this many lines.
constexpr uint64_t kMinLinesForMalformedCheck = 1000;

class DatasetReaderImpl final : public DatasetReader {
 public:
  DatasetReaderImpl(v1::ModelConfig config, const ReaderOptions& options,
                    std::vector<std::string> files, int num_all_files)
      : config_(std::move(config)),
        options_(options),
        files_(std::move(files)),
        num_all_files_(num_all_files),
        by_file_(config_.data().partition_by() == "file"),
        criteo_(config_.data().format() == v1::DataConfig::CRITEO_TSV),
        num_dense_(static_cast<int>(model::DenseColumns(config_).size())),
        num_features_(config_.features_size()),
        num_eval_(options.with_eval_columns ? static_cast<int>(model::EvalColumns(config_).size())
                                            : 0) {}

  // Builds the Criteo parser (one layout for every file) and opens the first file.
  absl::Status Init() {
    if (criteo_) {
      const std::vector<absl::string_view> names(model::CriteoColumnNames().begin(),
                                                 model::CriteoColumnNames().end());
      EMBER_ASSIGN_OR_RETURN(parser_,
                             model::LineParser::Create(config_, ParserOptions(), names, "Criteo"));
    }
    return OpenFile(0);
  }

  absl::StatusOr<bool> Next(int max_examples, model::ExampleBatch* batch) override {
    if (!failed_.ok()) return failed_;
    if (max_examples <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("max_examples ", max_examples, " <= 0"));
    }
    batch->Reset(num_dense_, num_features_, num_eval_);
    while (batch->size < max_examples) {
      if (source_ == nullptr) {
        if (file_index_ >= static_cast<int>(files_.size())) {
          if (absl::Status s = CheckMalformed(/*at_end=*/true); !s.ok()) return Fail(s);
          return batch->size > 0;
        }
        const uint64_t start = StartLine(file_index_);
        if (start == kFileDone) {  // finished before a Resume
          ++file_index_;
          continue;
        }
        if (absl::Status s = OpenAt(file_index_, start); !s.ok()) return Fail(s);
        continue;
      }
      absl::string_view line;
      absl::StatusOr<bool> more = source_->Next(&line);
      if (!more.ok()) return Fail(more.status());
      if (!*more) {
        source_.reset();
        ++file_index_;
        continue;
      }
      if (line.empty()) continue;  // blank lines are not data
      ++stats_.lines;
      switch (parser_->Parse(line, &error_)) {
        case model::LineParser::Result::kOk:
          if (!layers_.empty() &&
              ConsumedByLayers(layers_, DataLine{file_index_, source_->next_line() - 1},
                               parser_->partition_hash())) {
            ++stats_.skipped_other_partition;  // consumed under an earlier world size
            break;
          }
          parser_->AppendTo(batch);
          ++stats_.examples;
          break;
        case model::LineParser::Result::kOtherPartition:
          ++stats_.skipped_other_partition;
          break;
        case model::LineParser::Result::kMalformed:
          ++stats_.malformed;
          if (static_cast<int>(stats_.first_errors.size()) < options_.max_reported_errors) {
            stats_.first_errors.push_back(
                absl::StrCat(source_->path(), ":", source_->next_line() - 1, ": ", error_));
          }
          break;
      }
      if (stats_.malformed > 0) {
        if (absl::Status s = CheckMalformed(/*at_end=*/false); !s.ok()) return Fail(s);
      }
    }
    return true;
  }

  absl::Status Rewind() override {
    start_lines_.clear();
    layers_.clear();
    start_ = DataLine{};
    return Seek(ReaderPosition{});
  }

  absl::Status Resume(const EpochProgress& progress, const ReaderPosition& position) override {
    const auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("data position of epoch ", progress.epoch, " does not fit the data: ", why));
    };
    std::vector<uint64_t> start_lines;
    if (!progress.file_next_line.empty()) {
      if (!by_file_) return bad("per-file positions, but data.partition_by is a column");
      if (static_cast<int>(progress.file_next_line.size()) != num_all_files_) {
        return bad(absl::StrCat(progress.file_next_line.size(), " file positions for ",
                                num_all_files_, " files"));
      }
      for (size_t k = 0; k < files_.size(); ++k) {
        const size_t i = static_cast<size_t>(options_.rank) + k * options_.world_size;
        start_lines.push_back(std::max<uint64_t>(progress.file_next_line[i], 1));
      }
    }
    if (!progress.layers.empty()) {
      if (by_file_) return bad("hash layers, but data.partition_by is \"file\"");
      for (const HashLayer& layer : progress.layers) {
        if (layer.world_size < 1 || static_cast<int>(layer.frontier.size()) != layer.world_size) {
          return bad(absl::StrCat("a layer of world size ", layer.world_size, " has ",
                                  layer.frontier.size(), " frontiers"));
        }
        for (const DataLine& p : layer.frontier) {
          if (p.file < 0 || DataLine{num_all_files_, 1} < p) {
            return bad(absl::StrCat("a frontier (file ", p.file, ", line ", p.line,
                                    ") is past the ", num_all_files_, " files"));
          }
        }
      }
    }
    start_lines_ = std::move(start_lines);
    layers_ = progress.layers;
    start_ = LayersStart(layers_);
    return Seek(position);
  }

  ReaderPosition position() const override {
    ReaderPosition p;
    p.file_index = file_index_;
    p.line = source_ != nullptr ? source_->next_line() : 1;
    return p;
  }

  absl::Status Seek(const ReaderPosition& position) override {
    const int num_files = static_cast<int>(files_.size());
    if (position.file_index < 0 || position.file_index > num_files ||
        (position.file_index == num_files && position.line > 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("position (file ", position.file_index, ", line ", position.line,
                       ") is past the data of ", num_files, " files"));
    }
    source_.reset();
    failed_ = absl::OkStatus();
    DataLine at{position.file_index, position.line};
    if (at < start_) at = start_;  // before the newest layer's lines: all consumed
    file_index_ = at.file;
    if (file_index_ == num_files) return absl::OkStatus();
    const uint64_t start = StartLine(file_index_);
    if (start == kFileDone) return absl::OkStatus();  // Next skips it
    return OpenAt(file_index_, std::max(at.line, start));
  }

  const ReaderStats& stats() const override { return stats_; }
  const std::vector<std::string>& files() const override { return files_; }

 private:
  model::LineParserOptions ParserOptions() const {
    model::LineParserOptions o;
    o.rank = options_.rank;
    o.world_size = options_.world_size;
    o.with_eval_columns = options_.with_eval_columns;
    return o;
  }

  // The line a Resume's progress starts files_[index] at (kFileDone: skip it); 1 without.
  uint64_t StartLine(int index) const {
    return start_lines_.empty() ? 1 : start_lines_[static_cast<size_t>(index)];
  }

  // OpenFile, then reads on until line `line` is the next. INVALID_ARGUMENT when the
  // file ends before it.
  absl::Status OpenAt(int index, uint64_t line) {
    EMBER_RETURN_IF_ERROR(OpenFile(index));
    absl::string_view skipped;
    while (source_->next_line() < line) {
      EMBER_ASSIGN_OR_RETURN(bool more, source_->Next(&skipped));
      if (!more) {
        return absl::InvalidArgumentError(absl::StrCat("position (file ", index, ", line ", line,
                                                       ") is past the end of ", files_[index], " (",
                                                       source_->next_line() - 1, " lines)"));
      }
    }
    return absl::OkStatus();
  }

  // Opens files_[index] and, for schema TSV, reads its header and builds its parser.
  // An empty file has no header and no data.
  absl::Status OpenFile(int index) {
    source_.reset();
    EMBER_ASSIGN_OR_RETURN(source_, LineSource::Open(files_[index]));
    if (criteo_) return absl::OkStatus();
    absl::string_view header;
    EMBER_ASSIGN_OR_RETURN(bool has_header, source_->Next(&header));
    if (!has_header) return absl::OkStatus();
    std::vector<absl::string_view> names;
    model::SplitTabs(header, &names);
    absl::StatusOr<model::LineParser> parser =
        model::LineParser::Create(config_, ParserOptions(), names, files_[index]);
    if (!parser.ok()) {
      source_.reset();
      return parser.status();
    }
    parser_.emplace(*std::move(parser));
    return absl::OkStatus();
  }

  // INVALID_ARGUMENT when the malformed fraction of this partition's lines exceeds
  // data.max_malformed_fraction, checked at the end or after the first 1000 lines.
  absl::Status CheckMalformed(bool at_end) const {
    const double max_fraction = config_.data().max_malformed_fraction();
    if (max_fraction < 0 || stats_.malformed == 0) return absl::OkStatus();
    const uint64_t own = stats_.lines - stats_.skipped_other_partition;
    if (!at_end && own < kMinLinesForMalformedCheck) return absl::OkStatus();
    if (static_cast<double>(stats_.malformed) <= max_fraction * static_cast<double>(own)) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(
        absl::StrCat("too many malformed lines: ", stats_.malformed, " of ", own,
                     " lines (more than data.max_malformed_fraction ", max_fraction,
                     "); first errors: ", absl::StrJoin(stats_.first_errors, "; ")));
  }

  absl::Status Fail(absl::Status status) {
    failed_ = status;
    return status;
  }

  const v1::ModelConfig config_;
  const ReaderOptions options_;
  const std::vector<std::string> files_;
  const int num_all_files_;  // of the dataset (files_ is this rank's share)
  const bool by_file_;       // data.partition_by "file"
  const bool criteo_;
  const int num_dense_;
  const int num_features_;
  const int num_eval_;

  int file_index_ = 0;
  std::unique_ptr<LineSource> source_;       // null between files
  std::optional<model::LineParser> parser_;  // the current file's (schema) or Criteo's
  ReaderStats stats_;
  absl::Status failed_;  // sticky error of Next until Seek / Rewind
  std::string error_;    // scratch for Parse
  // The epoch's progress under earlier world sizes (Resume; cleared by Rewind): per file
  // of files_ its first line (empty: 1), the hash layers and their start.
  std::vector<uint64_t> start_lines_;
  std::vector<HashLayer> layers_;
  DataLine start_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DatasetReader>> DatasetReader::Open(const v1::ModelConfig& config,
                                                                   const std::string& path,
                                                                   const ReaderOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad partition: rank ", options.rank, " of world_size ", options.world_size));
  }
  EMBER_ASSIGN_OR_RETURN(v1::ModelConfig normalized,
                         model::NormalizeModelConfig(config, "model config"));
  EMBER_ASSIGN_OR_RETURN(std::vector<std::string> all_files, ListDataFiles(path));
  std::vector<std::string> files;
  const int num_all_files = static_cast<int>(all_files.size());
  if (normalized.data().partition_by() == "file") {
    if (static_cast<int>(all_files.size()) < options.world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " has ", all_files.size(), " data files for ", options.world_size,
          " workers partitioned by file: split the data into at least ", options.world_size,
          " files, or set data.partition_by to a CATEGORICAL column (e.g. the user ID)"));
    }
    for (size_t i = options.rank; i < all_files.size(); i += options.world_size) {
      files.push_back(std::move(all_files[i]));
    }
  } else {
    files = std::move(all_files);
  }
  auto reader = std::make_unique<DatasetReaderImpl>(std::move(normalized), options,
                                                    std::move(files), num_all_files);
  EMBER_RETURN_IF_ERROR(reader->Init());
  return reader;
}

}  // namespace ember::worker
