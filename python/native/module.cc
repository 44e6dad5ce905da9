// Copyright 2026 The Ember Authors.
//
// PYBIND11_MODULE(_ember): the error translation, array helpers, model configs and the
// dataset reader (bindings.h).

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/build_info.h"
#include "common/cluster_token.h"
#include "common/hash.h"
#include "common/malloc_tuning.h"
#include "common/model/example_batch.h"
#include "common/model/model_config.h"
#include "ember/v1/checkpoint.pb.h"
#include "ember/v1/model.pb.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"
#include "python/native/bindings.h"
#include "worker/data/file_source.h"
#include "worker/data/reader.h"
#include "worker/data/reader_position.h"
#include "worker/data/statistics_pass.h"
#include "worker/eval/metrics.h"
#include "worker/job/run_report.h"
#include "worker/training/trainer.h"

namespace ember::python {
namespace {

using model::ExampleBatch;
using worker::DatasetReader;
using worker::ReaderOptions;
using worker::ReaderPosition;

// A normalized model config. From Python it describes the data (columns, how to
// partition), the tables and the features; the dense model is the user's PyTorch module,
// so a config without a `dense` section is given CONCAT (no DOT dim check).
struct ModelConfig {
  v1::ModelConfig config;
};

ModelConfig Normalize(v1::ModelConfig parsed, const std::string& base_dir,
                      const std::string& origin) {
  if (!parsed.has_dense()) parsed.mutable_dense()->set_interaction(v1::DenseTowerConfig::CONCAT);
  std::string text;
  google::protobuf::TextFormat::PrintToString(parsed, &text);
  return ModelConfig{ValueOrThrow(model::ParseModelConfig(text, false, base_dir, origin))};
}

ModelConfig ParseText(const std::string& text, bool json, const std::string& base_dir,
                      const std::string& origin) {
  // Parsed twice: once raw (to see whether `dense` is there), once normalized with the
  // native loader's messages and path resolution.
  v1::ModelConfig parsed;
  if (json) {
    if (!google::protobuf::util::JsonStringToMessage(text, &parsed).ok()) {
      ThrowIfError(model::ParseModelConfig(text, true, base_dir, origin).status());
    }
  } else {
    google::protobuf::TextFormat::Parser parser;
    if (!parser.ParseFromString(text, &parsed)) {
      ThrowIfError(model::ParseModelConfig(text, false, base_dir, origin).status());
    }
  }
  return Normalize(std::move(parsed), base_dir, origin);
}

ModelConfig LoadConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) ThrowIfError(model::LoadModelConfig(path).status());  // NOT_FOUND / errno
  std::stringstream text;
  text << in.rdbuf();
  const std::string dir = std::filesystem::absolute(path).parent_path().string();
  return ParseText(text.str(), absl::EndsWithIgnoreCase(path, ".json"), dir, path);
}

std::string PoolingName(v1::FeatureConfig::Pooling p) {
  return p == v1::FeatureConfig::MEAN ? "mean" : "sum";
}

py::list Tables(const ModelConfig& c) {
  py::list out;
  for (const v1::TableConfig& t : c.config.tables()) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(t, &text);
    py::dict d;
    d["name"] = t.name();
    d["dim"] = t.dim();
    d["text"] = text;
    out.append(d);
  }
  return out;
}

py::list Features(const ModelConfig& c) {
  py::list out;
  for (const v1::FeatureConfig& f : c.config.features()) {
    py::dict d;
    d["name"] = f.name();
    d["column"] = f.column();
    d["table"] = f.table();
    d["pooling"] = PoolingName(f.pooling());
    out.append(d);
  }
  return out;
}

std::vector<std::string> Names(const std::vector<const v1::ColumnConfig*>& columns) {
  std::vector<std::string> names;
  for (const v1::ColumnConfig* c : columns) names.push_back(c->name());
  return names;
}

// What a job's JoinJob and checkpoints carry: the config without its schedule (the
// fields a resumed run may change) and `model` (the Python model's signature: its
// parameter names and shapes), digested together.
py::tuple JobDigest(const ModelConfig& c, const py::bytes& model) {
  const v1::ModelConfig digested = model::DigestedConfig(c.config);
  std::string bytes = digested.SerializeAsString();
  const std::string signature = model;
  const uint64_t digest = Mix64(HashBytes(bytes) ^ Mix64Alt(HashBytes(signature)));
  return py::make_tuple(digest, py::bytes(bytes));
}

template <typename T>
py::array_t<T> ArrayOf(const T* data, size_t n) {
  py::array_t<T> a(static_cast<py::ssize_t>(n));
  if (n > 0) std::memcpy(a.mutable_data(), data, n * sizeof(T));
  return a;
}

class Reader {
 public:
  Reader(const ModelConfig& config, const std::string& path, int rank, int world_size,
         bool with_eval_columns)
      : config_(config), path_(path), rank_(rank), world_size_(world_size) {
    ReaderOptions options;
    options.rank = rank;
    options.world_size = world_size;
    options.with_eval_columns = with_eval_columns;
    absl::StatusOr<std::unique_ptr<DatasetReader>> reader;
    {
      py::gil_scoped_release unlocked;
      reader = DatasetReader::Open(config_.config, path, options);
    }
    reader_ = ValueOrThrow(std::move(reader));
    for (const std::string& file : ValueOrThrow(worker::ListDataFiles(path))) {
      dataset_files_.push_back(std::filesystem::path(file).filename().string());
    }
  }

  // The next batch as a dict of NumPy arrays, or None at the end of the partition.
  py::object Next(int max_examples) {
    if (max_examples <= 0) ThrowInvalid(absl::StrCat("batch size ", max_examples, " is not > 0"));
    absl::StatusOr<bool> more;
    {
      py::gil_scoped_release unlocked;
      more = reader_->Next(max_examples, &batch_);
    }
    if (!ValueOrThrow(std::move(more))) return py::none();
    const size_t b = static_cast<size_t>(batch_.size);
    py::dict out;
    out["size"] = batch_.size;
    out["labels"] = ArrayOf(batch_.labels.data(), b);
    out["weights"] = ArrayOf(batch_.weights.data(), b);
    py::array_t<float> dense = ArrayOf(batch_.dense.data(), batch_.dense.size());
    out["dense"] = dense.reshape({static_cast<py::ssize_t>(b), py::ssize_t{batch_.num_dense}});
    py::list ids, offsets, eval;
    for (const model::SparseColumn& s : batch_.sparse) {
      py::array_t<int64_t> i(static_cast<py::ssize_t>(s.ids.size()));
      if (!s.ids.empty()) std::memcpy(i.mutable_data(), s.ids.data(), s.ids.size() * 8);
      py::array_t<int64_t> o(static_cast<py::ssize_t>(s.offsets.size()));
      int64_t* op = o.mutable_data();
      for (size_t k = 0; k < s.offsets.size(); ++k) op[k] = s.offsets[k];
      ids.append(i);
      offsets.append(o);
    }
    for (const std::vector<float>& e : batch_.eval) eval.append(ArrayOf(e.data(), e.size()));
    out["ids"] = ids;
    out["offsets"] = offsets;
    out["eval"] = eval;
    return out;
  }

  py::tuple Position() const {
    const ReaderPosition p = reader_->position();
    return py::make_tuple(p.file_index, p.line);
  }
  void Seek(int file_index, uint64_t line) {
    absl::Status s;
    {
      py::gil_scoped_release unlocked;
      s = reader_->Seek(ReaderPosition{file_index, line});
    }
    ThrowIfError(s);
  }
  void Rewind() {
    absl::Status s;
    {
      py::gil_scoped_release unlocked;
      s = reader_->Rewind();
    }
    ThrowIfError(s);
  }
  py::dict Stats() const {
    const worker::ReaderStats& s = reader_->stats();
    py::dict d;
    d["lines"] = s.lines;
    d["examples"] = s.examples;
    d["malformed"] = s.malformed;
    d["skipped_other_partition"] = s.skipped_other_partition;
    d["first_errors"] = s.first_errors;
    return d;
  }
  std::vector<std::string> Files() const { return reader_->files(); }

  // The dataset's files (names within its path, sorted): what a checkpoint records and
  // a resume compares (DataProgress.files).
  std::vector<std::string> DatasetFiles() const { return dataset_files_; }

  // Continues a job's reading after a checkpoint's worker state (`state`: the JoinJob
  // answer's dict, with its "data" bytes, a serialized DataProgress, and "cursors") as
  // rank `rank_` of `world_size_`, at the checkpoint's world size or another one
  // (worker/data/reader_position.h); `first_out`: training.epoch_end FIRST_OUT (an epoch
  // some rank had finished is over), else LAST_OUT (it continues). Returns {"epoch": the
  // epoch to read (`epochs`: none is left), "progress": the DataProgress bytes this
  // world size's checkpoints carry until the epoch ends}.
  py::dict ResumeFrom(const py::dict& state, int epochs, const std::string& origin,
                      bool first_out) {
    if (epochs < 1) ThrowInvalid(absl::StrCat("epochs ", epochs, " is not >= 1"));
    worker::SavedReading saved;
    v1::DataProgress data;
    try {
      saved.epoch = state["epoch"].cast<int>();
      saved.world_size = state["world_size"].cast<int>();
      if (state.contains("data") && !state["data"].is_none() &&
          !data.ParseFromString(state["data"].cast<std::string>())) {
        ThrowInvalid(absl::StrCat(origin, ": its data position does not parse"));
      }
      for (const py::handle& h : state["cursors"].cast<py::list>()) {
        const py::dict c = h.cast<py::dict>();
        saved.cursors.push_back(worker::RankCursor{
            c["epoch"].cast<int>(),
            ReaderPosition{c["file_index"].cast<int>(), c["line"].cast<uint64_t>()}});
      }
    } catch (const py::error_already_set& e) {
      ThrowInvalid(absl::StrCat(origin, ": worker state: ", e.what()));
    } catch (const py::cast_error& e) {
      ThrowInvalid(absl::StrCat(origin, ": worker state: a field has the wrong type: ", e.what()));
    }
    if (data.files_size() > 0) {
      const std::vector<std::string> then(data.files().begin(), data.files().end());
      if (absl::Status same = worker::CheckSameFiles(then, dataset_files_); !same.ok()) {
        ThrowIfError(absl::FailedPreconditionError(absl::StrCat(
            origin, " does not fit this dataset: ", same.message(), " (", path_, ")")));
      }
    }
    saved.progress = worker::FromProto(data);
    worker::DataShape shape;
    shape.by_file = config_.config.data().partition_by() == "file";
    shape.num_files = static_cast<int>(dataset_files_.size());
    shape.first_out = first_out;  // training.epoch_end FIRST_OUT (else LAST_OUT)
    shape.epochs = epochs;
    absl::StatusOr<worker::ResumePoint> point =
        worker::ResumePointFor(saved, shape, world_size_, rank_);
    if (!point.ok()) {
      ThrowIfError(absl::Status(point.status().code(),
                                absl::StrCat(origin, ": ", point.status().message())));
    }
    if (point->epoch < epochs) {
      absl::Status s;
      {
        py::gil_scoped_release unlocked;
        s = reader_->Resume(point->progress, point->position);
      }
      ThrowIfError(s);
    }
    // What this world size's checkpoints carry: the saved world size's progress, or the
    // one this world size starts from (as ember-worker's Trainer::DataResumePoint).
    v1::DataProgress carry;
    worker::ToProto(world_size_ == saved.world_size ? saved.progress : point->progress, &carry);
    py::dict out;
    out["epoch"] = point->epoch;
    out["progress"] = py::bytes(carry.SerializeAsString());
    return out;
  }

 private:
  ModelConfig config_;  // the reader keeps pointers into it
  std::string path_;
  int rank_;
  int world_size_;
  std::vector<std::string> dataset_files_;
  std::unique_ptr<DatasetReader> reader_;
  model::ExampleBatch batch_;
};

template <typename T>
std::optional<T> Optional(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return std::nullopt;
  return d[key].cast<T>();
}

// result.json, metrics.tsv and training.svg as ember-worker writes them, from a
// Python run's figures (`result`: the TrainResult fields by name; `curve`: dicts of
// step, examples, loss and optionally test_auc, test_logloss).
void WriteRunDirectory(const std::string& run_dir, const ModelConfig& config, int world_size,
                       const py::dict& result, const std::vector<py::dict>& curve) {
  worker::TrainerOptions options;
  options.config = config.config;
  options.world_size = world_size;
  worker::TrainResult r;
  try {
    r.steps = Optional<uint64_t>(result, "steps").value_or(0);
    r.examples = Optional<uint64_t>(result, "examples").value_or(0);
    r.train_seconds = Optional<double>(result, "train_seconds").value_or(0);
    r.examples_per_sec = Optional<double>(result, "examples_per_sec").value_or(0);
    r.final_loss = Optional<double>(result, "final_loss").value_or(0);
    r.sparse_rows = Optional<uint64_t>(result, "sparse_rows").value_or(0);
    r.sparse_checksum = Optional<uint64_t>(result, "sparse_checksum").value_or(0);
    r.dense_checksum = Optional<uint64_t>(result, "dense_checksum").value_or(0);
    r.model_checksum = Optional<uint64_t>(result, "model_checksum").value_or(0);
    r.attempt = Optional<uint64_t>(result, "attempt").value_or(0);
    r.recoveries = Optional<uint64_t>(result, "recoveries").value_or(0);
    r.checkpoints = Optional<uint64_t>(result, "checkpoints").value_or(0);
    r.resumed_from = Optional<std::string>(result, "resumed_from").value_or("");
    r.eval.examples = Optional<uint64_t>(result, "test_examples").value_or(0);
    r.eval.auc = Optional<double>(result, "test_auc").value_or(0);
    r.eval.logloss = Optional<double>(result, "test_logloss").value_or(0);
    r.eval.oracle_auc = Optional<double>(result, "oracle_auc");
    r.eval.oracle_logloss = Optional<double>(result, "oracle_logloss");
    r.eval.seconds = Optional<double>(result, "eval_seconds").value_or(0);
  } catch (const py::cast_error& e) {
    ThrowInvalid(absl::StrCat("run result: a field has the wrong type: ", e.what()));
  }
  std::vector<worker::CurvePoint> points;
  for (const py::dict& c : curve) {
    worker::CurvePoint p;
    p.step = Optional<uint64_t>(c, "step").value_or(0);
    p.examples = Optional<uint64_t>(c, "examples").value_or(0);
    p.loss = Optional<double>(c, "loss").value_or(0);
    p.test_auc = Optional<double>(c, "test_auc");
    p.test_logloss = Optional<double>(c, "test_logloss");
    points.push_back(p);
  }
  ThrowIfError(worker::WriteRunDirectory(run_dir, config.config, options, r, points));
}

// Scores and labels of one evaluation, float32 1-D of one length.
double Metric(bool auc, const py::handle& scores, const py::handle& labels) {
  const py::ssize_t n =
      py::isinstance<py::array>(scores) ? py::reinterpret_borrow<py::array>(scores).size() : 0;
  py::array_t<float, py::array::c_style> s = FloatsFromArray(scores, {n}, "scores");
  py::array_t<float, py::array::c_style> l = FloatsFromArray(labels, {n}, "labels");
  absl::Span<const float> ss(s.data(), n), ls(l.data(), n);
  return ValueOrThrow(auc ? worker::RocAuc(ss, ls) : worker::LogLoss(ss, ls));
}

const char* CodeName(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kCancelled:
      return "CANCELLED";
    case absl::StatusCode::kUnknown:
      return "UNKNOWN";
    case absl::StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case absl::StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case absl::StatusCode::kNotFound:
      return "NOT_FOUND";
    case absl::StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case absl::StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case absl::StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case absl::StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case absl::StatusCode::kAborted:
      return "ABORTED";
    case absl::StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case absl::StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case absl::StatusCode::kInternal:
      return "INTERNAL";
    case absl::StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case absl::StatusCode::kDataLoss:
      return "DATA_LOSS";
    case absl::StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

}  // namespace

std::vector<uint64_t> IdsFromArray(const py::handle& handle, const std::string& what) {
  if (!py::isinstance<py::array>(handle)) {
    ThrowInvalid(absl::StrCat(what, ": expected a NumPy int64 array, got ",
                              std::string(py::str(handle.get_type().attr("__name__")))));
  }
  py::array array = py::reinterpret_borrow<py::array>(handle);
  const py::dtype dtype = array.dtype();
  if ((dtype.kind() != 'i' && dtype.kind() != 'u') || dtype.itemsize() != 8) {
    ThrowInvalid(absl::StrCat(what, ": IDs must be int64 (or uint64), got ",
                              std::string(py::str(py::object(dtype)))));
  }
  if (array.ndim() != 1) {
    ThrowInvalid(
        absl::StrCat(what, ": IDs must be a 1-D array, got ", array.ndim(), " dimensions"));
  }
  py::array_t<int64_t, py::array::c_style> c =
      dtype.kind() == 'i' ? py::array_t<int64_t, py::array::c_style>::ensure(array)
                          : py::array_t<int64_t, py::array::c_style>::ensure(
                                array.attr("view")(py::dtype::of<int64_t>()));
  std::vector<uint64_t> ids(static_cast<size_t>(c.size()));
  if (!ids.empty()) std::memcpy(ids.data(), c.data(), ids.size() * 8);
  return ids;
}

py::array_t<float, py::array::c_style> FloatsFromArray(const py::handle& handle,
                                                       const std::vector<py::ssize_t>& shape,
                                                       const std::string& what) {
  if (!py::isinstance<py::array>(handle)) {
    ThrowInvalid(absl::StrCat(what, ": expected a NumPy float32 array, got ",
                              std::string(py::str(handle.get_type().attr("__name__")))));
  }
  py::array array = py::reinterpret_borrow<py::array>(handle);
  if (!array.dtype().is(py::dtype::of<float>())) {
    ThrowInvalid(absl::StrCat(what, ": expected float32, got ",
                              std::string(py::str(py::object(array.dtype())))));
  }
  bool same = array.ndim() == static_cast<py::ssize_t>(shape.size());
  for (size_t i = 0; same && i < shape.size(); ++i) same = array.shape(i) == shape[i];
  if (!same) {
    std::string want, got;
    for (py::ssize_t s : shape) absl::StrAppend(&want, want.empty() ? "" : ", ", s);
    for (py::ssize_t i = 0; i < array.ndim(); ++i) {
      absl::StrAppend(&got, got.empty() ? "" : ", ", array.shape(i));
    }
    ThrowInvalid(absl::StrCat(what, ": shape (", got, ") is not (", want, ")"));
  }
  return py::array_t<float, py::array::c_style>::ensure(array);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const std::string& ca,
                                                             const std::string& cert,
                                                             const std::string& key) {
  TlsOptions options{ca, cert, key};
  if (!options.enabled()) return nullptr;
  return ValueOrThrow(TlsCredentials::Load(options)).Channel();
}

std::string ClusterTokenFromEnv(bool tls) {
  const char* path = std::getenv("EMBER_CLUSTER_TOKEN_FILE");
  if (tls || path == nullptr || *path == '\0') return "";
  return ValueOrThrow(LoadClusterToken({.token = "", .token_file = path}, /*tls=*/false));
}

PYBIND11_MODULE(_ember, m) {
  m.doc() =
      "Ember's native runtime (PS client, readers, collectives, jobs); use the `ember` package";
  // As every Ember binary does (common/malloc_tuning.h): the pulls' and pushes' buffers,
  // and PyTorch's tensors, reuse freed memory instead of faulting in pages each step
  // (ember.torch +15% examples/s in `ember-bench python`). EMBER_MALLOC_DEFAULTS=1, or
  // the process's own MALLOC_*_THRESHOLD_ / GLIBC_TUNABLES, keep glibc's thresholds.
  KeepFreedBuffers();
  m.attr("__version__") = std::string(BuildVersion());

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object make = py::module_::import("ember.errors").attr("from_status");
      py::object error = make(static_cast<int>(e.status().code()), CodeName(e.status().code()),
                              std::string(e.status().message()));
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
    }
  });

  py::class_<ModelConfig>(m, "ModelConfig")
      .def_property_readonly("name", [](const ModelConfig& c) { return c.config.name(); })
      .def_property_readonly("text",
                             [](const ModelConfig& c) {
                               std::string text;
                               google::protobuf::TextFormat::PrintToString(c.config, &text);
                               return text;
                             })
      .def_property_readonly("tables", &Tables)
      .def_property_readonly("features", &Features)
      .def_property_readonly(
          "dense_columns",
          [](const ModelConfig& c) { return Names(model::DenseColumns(c.config)); })
      .def_property_readonly(
          "eval_columns", [](const ModelConfig& c) { return Names(model::EvalColumns(c.config)); })
      .def_property_readonly("train_path",
                             [](const ModelConfig& c) { return c.config.data().train_path(); })
      .def_property_readonly("test_path",
                             [](const ModelConfig& c) { return c.config.data().test_path(); })
      .def_property_readonly("partition_by",
                             [](const ModelConfig& c) { return c.config.data().partition_by(); })
      .def_property_readonly("training",
                             [](const ModelConfig& c) {
                               const v1::TrainingConfig& t = c.config.training();
                               py::dict d;
                               d["batch_size"] = t.batch_size();
                               d["epochs"] = t.epochs();
                               d["consistency"] = absl::AsciiStrToLower(
                                   v1::TrainingConfig::Consistency_Name(t.consistency()));
                               d["staleness"] = t.staleness();
                               d["max_steps"] = t.max_steps();
                               d["log_every_steps"] = t.log_every_steps();
                               d["eval_every_steps"] = t.eval_every_steps();
                               d["eval_max_examples"] = t.eval_max_examples();
                               d["epoch_end"] = v1::TrainingConfig::EpochEnd_Name(t.epoch_end());
                               return d;
                             })
      .def_property_readonly("checkpoint",
                             [](const ModelConfig& c) {
                               py::dict d;
                               d["every_steps"] = c.config.checkpoint().every_steps();
                               d["every_seconds"] = c.config.checkpoint().every_seconds();
                               return d;
                             })
      .def_property_readonly("eval",
                             [](const ModelConfig& c) {
                               const v1::EvalConfig& e = c.config.eval();
                               py::dict d;
                               d["true_prob_column"] = e.true_prob_column();
                               d["item_count_column"] = e.item_count_column();
                               d["cold_user_column"] = e.cold_user_column();
                               return d;
                             })
      .def(
          "with_statistics",
          [](const ModelConfig& c) {
            absl::StatusOr<v1::ModelConfig> filled;
            {
              py::gil_scoped_release release;  // reads up to statistics_max_examples lines
              filled = worker::ComputeStatistics(c.config);
            }
            return ModelConfig{ValueOrThrow(std::move(filled))};
          },
          "The config with the data statistics its feature transforms need (standardize "
          "without mean/std, BUCKETIZED quantiles) computed from the first "
          "statistics_max_examples training examples, as ember-worker does before training "
          "(docs/OPERATIONS.md \"Feature transforms\"); the config itself when none is needed")
      .def("job_digest", &JobDigest, py::arg("model_signature"),
           "(digest, config bytes) a job's JoinJob and checkpoints carry")
      .def("__repr__", [](const ModelConfig& c) {
        return absl::StrCat("<ember ModelConfig '", c.config.name(), "': ", c.config.tables_size(),
                            " tables, ", c.config.features_size(), " features>");
      });
  m.def("load_model_config", &LoadConfig, py::arg("path"),
        "Reads a model config file (text format; .json: JSON) and normalizes it");
  m.def(
      "parse_model_config",
      [](const std::string& text, const std::string& base_dir, const std::string& origin) {
        return ParseText(text, false, base_dir, origin);
      },
      py::arg("text"), py::arg("base_dir") = "", py::arg("origin") = "<text>");

  py::class_<Reader>(m, "Reader")
      .def(py::init<const ModelConfig&, const std::string&, int, int, bool>(), py::arg("config"),
           py::arg("path"), py::arg("rank") = 0, py::arg("world_size") = 1,
           py::arg("with_eval_columns") = false)
      .def("next", &Reader::Next, py::arg("max_examples"))
      .def_property_readonly("position", &Reader::Position)
      .def("seek", &Reader::Seek, py::arg("file_index"), py::arg("line"))
      .def("rewind", &Reader::Rewind)
      .def_property_readonly("stats", &Reader::Stats)
      .def_property_readonly("files", &Reader::Files)
      .def_property_readonly("dataset_files", &Reader::DatasetFiles)
      .def("resume_from", &Reader::ResumeFrom, py::arg("state"), py::arg("epochs"),
           py::arg("origin") = "checkpoint", py::arg("first_out") = true);

  m.def("write_run_directory", &WriteRunDirectory, py::arg("run_dir"), py::arg("config"),
        py::arg("world_size"), py::arg("result"), py::arg("curve"));
  m.def(
      "roc_auc", [](const py::handle& s, const py::handle& l) { return Metric(true, s, l); },
      py::arg("scores"), py::arg("labels"), "Exact ROC AUC (ties count one half)");
  m.def(
      "log_loss", [](const py::handle& s, const py::handle& l) { return Metric(false, s, l); },
      py::arg("probabilities"), py::arg("labels"));

  BindPs(m);
  BindWorker(m);
}

}  // namespace ember::python
