// Copyright 2026 The Ember Authors.
//
// Client (PsClient), SparseLookup (one batch's sparse side) and ServingClient
// (bindings.h).

#include <cmath>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/hash.h"
#include "common/model/example_batch.h"
#include "common/ps_client.h"
#include "ember/v1/serving.grpc.pb.h"
#include "google/protobuf/text_format.h"
#include "grpcpp/create_channel.h"
#include "python/native/bindings.h"
#include "worker/training/sparse_exchange.h"
#include "worker/training/sparse_features.h"

namespace ember::python {
namespace {

std::string TableText(const v1::TableConfig& t) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(t, &text);
  return text;
}

py::dict TableDict(const v1::TableConfig& t) {
  py::dict d;
  d["name"] = t.name();
  d["dim"] = t.dim();
  d["text"] = TableText(t);
  return d;
}

class Client {
 public:
  Client(const std::string& coordinator, const std::map<uint32_t, std::string>& shards,
         std::optional<uint64_t> worker_id, uint64_t first_sequence, uint64_t attempt,
         double deadline_s, double connect_timeout_s, const std::string& tls_ca,
         const std::string& tls_cert, const std::string& tls_key, const std::string& job) {
    if (coordinator.empty() && shards.empty()) {
      ThrowInvalid("Client needs a coordinator address or the shards' addresses");
    }
    if (!(deadline_s > 0) || !(connect_timeout_s >= 0)) {
      ThrowInvalid("deadline_s must be > 0 and connect_timeout_s >= 0");
    }
    PsClientOptions options;
    options.coordinator_address = coordinator;
    options.channel_credentials = ChannelCredentials(tls_ca, tls_cert, tls_key);
    options.cluster_token = ClusterTokenFromEnv(options.channel_credentials != nullptr);
    options.shard_addresses = shards;
    if (coordinator.empty()) {
      std::vector<uint32_t> ids;
      for (const auto& [id, address] : shards) ids.push_back(id);
      options.slot_map = SlotMap::Even(ids, /*epoch=*/1);
    }
    // A fresh id per client unless given: pushes of two clients never share a dedup key.
    options.worker_id =
        worker_id.has_value()
            ? *worker_id
            : Mix64(static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())) ^
                    (static_cast<uint64_t>(getpid()) << 20) ^ reinterpret_cast<uintptr_t>(this));
    options.first_sequence = first_sequence;
    options.attempt = attempt;
    options.job = job;
    options.deadline = absl::Seconds(deadline_s);
    options.max_retries = 12;
    absl::StatusOr<std::unique_ptr<PsClient>> client;
    {
      py::gil_scoped_release unlocked;
      // A coordinator that has not assigned slots yet (shards still registering) says
      // UNAVAILABLE: wait for it, bounded.
      const absl::Time until = absl::Now() + absl::Seconds(connect_timeout_s);
      while (true) {
        client = PsClient::Create(options);
        if (client.ok() || client.status().code() != absl::StatusCode::kUnavailable ||
            absl::Now() >= until) {
          break;
        }
        absl::SleepFor(absl::Milliseconds(200));  // retry pacing
      }
    }
    if (!client.ok()) {
      const bool unavailable = client.status().code() == absl::StatusCode::kUnavailable;
      ThrowIfError(absl::Status(
          client.status().code(),
          absl::StrCat(
              "connecting to the PS cluster", coordinator.empty() ? "" : " at coordinator ",
              coordinator, ": ", client.status().message(),
              unavailable
                  ? absl::StrCat(" ", TlsHintForUnavailable(options.channel_credentials != nullptr))
                  : "")));
    }
    client_ = std::shared_ptr<PsClient>(std::move(*client));
    worker_id_ = options.worker_id;
  }

  PsClient& get() const { return *client_; }
  uint64_t worker_id() const { return worker_id_; }

  py::dict CreateTable(const std::string& text) {
    v1::TableConfig config;
    google::protobuf::TextFormat::Parser parser;
    if (!parser.ParseFromString(text, &config)) {
      ThrowInvalid(absl::StrCat("table config does not parse (TableConfig text format): ", text));
    }
    absl::Status s;
    absl::StatusOr<v1::TableConfig> normalized;
    {
      py::gil_scoped_release unlocked;
      s = client_->CreateTableEverywhere(config);
      if (s.ok()) normalized = client_->GetTable(config.name());
    }
    if (!s.ok()) {
      ThrowIfError(absl::Status(
          s.code(), absl::StrCat("creating table '", config.name(), "': ", s.message())));
    }
    return TableDict(ValueOrThrow(std::move(normalized)));
  }

  py::dict Table(const std::string& name) const {
    absl::StatusOr<v1::TableConfig> t = client_->GetTable(name);
    if (!t.ok()) {
      ThrowIfError(absl::NotFoundError(absl::StrCat(
          "table '", name, "' is not known to this client (create it, or check its name)")));
    }
    return TableDict(*t);
  }

  int Dim(const std::string& table) const {
    absl::StatusOr<v1::TableConfig> t = client_->GetTable(table);
    if (!t.ok()) {
      ThrowIfError(absl::NotFoundError(absl::StrCat(
          "table '", table, "' is not known to this client (create it, or check its name)")));
    }
    return static_cast<int>(t->dim());
  }

  py::array_t<float> Pull(const std::string& table, const py::handle& ids_array, int64_t step) {
    const int dim = Dim(table);
    const std::vector<uint64_t> ids = IdsFromArray(ids_array, "ids");
    py::array_t<float> out({static_cast<py::ssize_t>(ids.size()), py::ssize_t{dim}});
    float* data = out.mutable_data();
    absl::Status s;
    {
      py::gil_scoped_release unlocked;
      PsCallOptions call;
      call.step = step;
      s = client_->Pull(table, ids, absl::MakeSpan(data, ids.size() * dim), call);
    }
    ThrowIfError(s);
    return out;
  }

  void Push(const std::string& table, const py::handle& ids_array, const py::handle& grads_array,
            int64_t step) {
    const int dim = Dim(table);
    const std::vector<uint64_t> ids = IdsFromArray(ids_array, "ids");
    py::array_t<float, py::array::c_style> grads =
        FloatsFromArray(grads_array, {static_cast<py::ssize_t>(ids.size()), dim}, "grads");
    const float* g = grads.data();
    for (size_t i = 0; i < ids.size() * dim; ++i) {
      if (!std::isfinite(g[i])) {
        ThrowInvalid(absl::StrCat("grads: row ", i / dim, " (id ", ids[i / dim],
                                  ") is not finite (", g[i], "); nothing was pushed"));
      }
    }
    absl::Status s;
    {
      py::gil_scoped_release unlocked;
      s = client_->Push(table, ids, absl::MakeConstSpan(g, ids.size() * dim), step);
    }
    ThrowIfError(s);
  }

  py::dict Checksum(const std::string& table) {
    absl::StatusOr<std::map<std::string, PsClient::TableDigest>> sums;
    {
      py::gil_scoped_release unlocked;
      sums = client_->Checksum(table);
    }
    py::dict out;
    for (const auto& [name, digest] : ValueOrThrow(std::move(sums))) {
      out[py::str(name)] = py::make_tuple(digest.rows, digest.digest);
    }
    return out;
  }

  void Refresh() {
    absl::Status s;
    {
      py::gil_scoped_release unlocked;
      s = client_->RefreshClusterMap();
    }
    ThrowIfError(s);
  }

  size_t Shards() const { return client_->slot_map().Shards().size(); }

 private:
  std::shared_ptr<PsClient> client_;
  uint64_t worker_id_ = 0;
};

// One batch's sparse side, on the native worker's SparseBatch: the unique IDs per
// table (over every feature that uses the table, first-seen order: features in
// order, examples in order), their pulls, SUM/MEAN pooling and its backward, and one
// push per unique ID (in BSP with several workers through the sparse exchange).
class SparseLookup {
 public:
  // `poolings`: per feature "sum", "mean" or "none" (the rows are used un-pooled by
  // Python; such a feature still takes its columns in Pool's output).
  SparseLookup(std::shared_ptr<Client> client, const std::vector<std::string>& tables,
               const std::vector<int>& feature_tables, const std::vector<std::string>& poolings)
      : client_(std::move(client)) {
    worker::SparseLayout layout;
    for (const std::string& name : tables) {
      layout.tables.push_back({name, client_->Dim(name)});
    }
    for (size_t f = 0; f < feature_tables.size(); ++f) {
      const int t = feature_tables[f];
      if (t < 0 || t >= static_cast<int>(tables.size())) {
        ThrowInvalid(absl::StrCat("feature ", f, " names table index ", t, ", not in [0, ",
                                  tables.size(), ")"));
      }
      worker::SparseLayout::Feature feature;
      feature.name = absl::StrCat("feature ", f);
      feature.table = t;
      feature.dim = layout.tables[t].dim;
      feature.mean = f < poolings.size() && poolings[f] == "mean";
      feature.pooled_offset = layout.pooled_width;
      layout.pooled_width += feature.dim;
      layout.features.push_back(feature);
    }
    batch_ = std::make_unique<worker::SparseBatch>(std::move(layout));
  }
  ~SparseLookup() {
    // Leave nothing in flight that writes into (or reads) the batch's buffers.
    py::gil_scoped_release unlocked;
    WaitAll(&handles_).IgnoreError();
    WaitAll(&push_handles_).IgnoreError();
  }

  // Returns (unique IDs per table, each feature's IDs as positions in its table's
  // unique IDs), as int64 arrays.
  py::tuple Prepare(const std::vector<py::object>& ids, const std::vector<py::object>& offsets,
                    const std::vector<std::string>& names) {
    const size_t num_features = batch_->layout().features.size();
    if (ids.size() != num_features || offsets.size() != num_features) {
      ThrowInvalid(absl::StrCat("expected the IDs and offsets of ", num_features, " features, got ",
                                ids.size(), " and ", offsets.size()));
    }
    if (prepared_) ThrowInvalid("this batch was prepared already");
    model::ExampleBatch example;
    example.sparse.resize(num_features);
    int64_t batch_size = -1;
    for (size_t f = 0; f < num_features; ++f) {
      const std::string what =
          f < names.size() ? absl::StrCat("feature '", names[f], "'") : absl::StrCat("feature ", f);
      model::SparseColumn& column = example.sparse[f];
      column.ids = IdsFromArray(ids[f], what + " IDs");
      const std::vector<uint64_t> off = IdsFromArray(offsets[f], what + " offsets");
      if (off.empty() || off[0] != 0 || off.back() != column.ids.size()) {
        ThrowInvalid(absl::StrCat(what, ": offsets must start at 0 and end at the number of IDs (",
                                  column.ids.size(), "), got ", off.empty() ? 0 : off[0], " .. ",
                                  off.empty() ? 0 : off.back()));
      }
      if (column.ids.size() > UINT32_MAX) ThrowInvalid(what + ": more than 2^32 IDs in a batch");
      column.offsets.resize(off.size());
      for (size_t k = 0; k < off.size(); ++k) {
        if (k > 0 && off[k] < off[k - 1]) {
          ThrowInvalid(absl::StrCat(what, ": offsets decrease at example ", k - 1));
        }
        column.offsets[k] = static_cast<uint32_t>(off[k]);
      }
      const int64_t b = static_cast<int64_t>(off.size()) - 1;
      if (batch_size >= 0 && b != batch_size) {
        ThrowInvalid(absl::StrCat(what, " has ", b, " examples, the first feature ", batch_size));
      }
      batch_size = b;
    }
    example.size = static_cast<int>(batch_size < 0 ? 0 : batch_size);
    batch_->Build(example);  // the native dedup
    py::list unique, inverse;
    for (int t = 0; t < batch_->num_tables(); ++t) {
      const std::vector<uint64_t>& u = batch_->table(t).ids;
      py::array_t<int64_t> a(static_cast<py::ssize_t>(u.size()));
      if (!u.empty()) std::memcpy(a.mutable_data(), u.data(), u.size() * 8);
      unique.append(a);
    }
    for (size_t f = 0; f < num_features; ++f) {
      const std::vector<uint32_t>& at = batch_->occurrences(static_cast<int>(f));
      py::array_t<int64_t> a(static_cast<py::ssize_t>(at.size()));
      int64_t* out = a.mutable_data();
      for (size_t k = 0; k < at.size(); ++k) out[k] = at[k];
      inverse.append(a);
    }
    prepared_ = true;
    return py::make_tuple(unique, inverse);
  }

  void StartPull(int64_t step) {
    if (!prepared_) ThrowInvalid("prepare the batch before pulling it");
    if (pulling_ || pulled_) ThrowInvalid("this batch was pulled already");
    const worker::SparseLayout& layout = batch_->layout();
    py::gil_scoped_release unlocked;
    PsCallOptions call;
    call.step = step;
    for (int t = 0; t < batch_->num_tables(); ++t) {
      worker::SparseBatch::TableData& table = batch_->table(t);
      if (table.ids.empty()) continue;
      handles_.push_back(client_->get().PullAsync(layout.tables[t].name, table.ids,
                                                  absl::MakeSpan(table.rows), call));
    }
    pulling_ = true;
  }

  // The pulled rows per table, [unique IDs, dim] float32 arrays over the batch's own
  // buffers (they keep this object alive).
  py::list FinishPull() {
    if (!pulling_) ThrowInvalid("no pull was started for this batch");
    absl::Status s;
    {
      py::gil_scoped_release unlocked;
      s = WaitAll(&handles_);
    }
    pulling_ = false;
    ThrowIfError(s);
    pulled_ = true;
    py::object self = py::cast(this, py::return_value_policy::reference);
    py::list out;
    for (int t = 0; t < batch_->num_tables(); ++t) {
      worker::SparseBatch::TableData& table = batch_->table(t);
      const py::ssize_t dim = batch_->layout().tables[t].dim;
      out.append(py::array_t<float>(
          {static_cast<py::ssize_t>(table.ids.size()), dim},
          {dim * static_cast<py::ssize_t>(sizeof(float)), static_cast<py::ssize_t>(sizeof(float))},
          table.rows.data(), self));
    }
    return out;
  }

  // SUM/MEAN pooling of every feature (worker/training/sparse_features.h): float32
  // [batch, sum of the features' dims], features in order.
  py::array_t<float> Pool() {
    if (!pulled_) ThrowInvalid("pull the batch before pooling it");
    const worker::SparseLayout& layout = batch_->layout();
    py::array_t<float> out(
        {static_cast<py::ssize_t>(batch_->batch_size()), py::ssize_t{layout.pooled_width}});
    float* data = out.mutable_data();
    const size_t n = static_cast<size_t>(batch_->batch_size()) * layout.pooled_width;
    {
      py::gil_scoped_release unlocked;
      batch_->Pool(absl::MakeSpan(data, n));
    }
    return out;
  }

  // Pushes the gradients of every table's unique rows (float32 [unique IDs, dim]).
  py::tuple Push(const std::vector<py::object>& grads, int64_t step, float scale,
                 py::object collective, bool wait) {
    CheckPushable();
    const worker::SparseLayout& layout = batch_->layout();
    if (grads.size() != static_cast<size_t>(batch_->num_tables())) {
      ThrowInvalid(absl::StrCat("expected the gradients of ", batch_->num_tables(), " tables, got ",
                                grads.size()));
    }
    for (int t = 0; t < batch_->num_tables(); ++t) {
      worker::SparseBatch::TableData& table = batch_->table(t);
      const int dim = layout.tables[t].dim;
      py::array_t<float, py::array::c_style> g =
          FloatsFromArray(grads[t], {static_cast<py::ssize_t>(table.ids.size()), dim},
                          absl::StrCat("gradients of table '", layout.tables[t].name, "'"));
      if (!table.grads.empty()) {
        std::memcpy(table.grads.data(), g.data(), table.grads.size() * sizeof(float));
      }
    }
    return PushGrads(step, scale, collective, wait);
  }

  // Pool's backward from the gradient of its output ([batch, pooled width]), then the
  // push of the rows' gradients.
  py::tuple PushPooled(const py::handle& d_pooled, int64_t step, float scale, py::object collective,
                       bool wait) {
    CheckPushable();
    const worker::SparseLayout& layout = batch_->layout();
    py::array_t<float, py::array::c_style> d = FloatsFromArray(
        d_pooled, {static_cast<py::ssize_t>(batch_->batch_size()), layout.pooled_width},
        "gradient of the pooled features");
    {
      py::gil_scoped_release unlocked;
      const size_t n = static_cast<size_t>(batch_->batch_size()) * layout.pooled_width;
      batch_->Backward(absl::MakeConstSpan(d.data(), n));
    }
    return PushGrads(step, scale, collective, wait);
  }

  // Waits for the pushes Push left in flight; their first error. Returns the seconds
  // it waited.
  double FinishPush() {
    const absl::Time start = absl::Now();
    absl::Status s;
    {
      py::gil_scoped_release unlocked;
      s = WaitAll(&push_handles_);
    }
    ThrowIfError(s);
    return absl::ToDoubleSeconds(absl::Now() - start);
  }

  int64_t batch_size() const { return batch_->batch_size(); }
  size_t unique_ids() const { return batch_->unique_ids(); }
  bool pushed() const { return pushed_; }
  int pooled_width() const { return batch_->layout().pooled_width; }

 private:
  void CheckPushable() const {
    if (pushed_) {
      ThrowIfError(absl::FailedPreconditionError(
          "this batch's sparse gradients were pushed already (backward ran twice on one "
          "forward: the second would apply the update again); nothing was pushed"));
    }
    if (!pulled_) ThrowInvalid("prepare and pull the batch before pushing its gradients");
  }

  // Checks and scales the tables' grads, then pushes them: with a collective of several
  // workers (BSP) first summed across workers per ID in rank order, each ID pushed once
  // by its owner rank (worker/training/sparse_exchange.h). Returns (seconds in the
  // exchange, seconds pushing). Without `wait` the pushes stay in flight (FinishPush);
  // the exchange is always waited for.
  py::tuple PushGrads(int64_t step, float scale, const py::object& collective, bool wait) {
    if (!std::isfinite(scale)) ThrowInvalid("gradient scale is not finite");
    const worker::SparseLayout& layout = batch_->layout();
    for (int t = 0; t < batch_->num_tables(); ++t) {
      worker::SparseBatch::TableData& table = batch_->table(t);
      const int dim = layout.tables[t].dim;
      for (size_t i = 0; i < table.grads.size(); ++i) {
        if (!std::isfinite(table.grads[i])) {
          ThrowInvalid(absl::StrCat("gradients of table '", layout.tables[t].name,
                                    "': the gradient of id ", table.ids[i / dim],
                                    " is not finite (", table.grads[i],
                                    "); nothing was pushed for this batch"));
        }
        table.grads[i] *= scale;
      }
    }
    worker::Collective* exchange = collective.is_none() ? nullptr : CollectiveOf(collective);
    pushed_ = true;
    absl::Status s;
    const absl::Time start = absl::Now();
    absl::Time exchanged = start;
    {
      py::gil_scoped_release unlocked;
      std::vector<PsHandle>& handles = push_handles_;
      if (exchange != nullptr && exchange->world_size() > 1) {
        s = worker::ReduceSparseGradients(*exchange, *batch_, &owned_);
        exchanged = absl::Now();
        if (!s.ok()) s = absl::Status(s.code(), absl::StrCat("sparse exchange: ", s.message()));
        for (size_t t = 0; s.ok() && t < owned_.size(); ++t) {
          if (owned_[t].ids.empty()) continue;
          handles.push_back(client_->get().PushAsync(layout.tables[t].name, owned_[t].ids,
                                                     owned_[t].grads, step));
        }
      } else {
        for (int t = 0; t < batch_->num_tables(); ++t) {
          const worker::SparseBatch::TableData& table = batch_->table(t);
          if (table.ids.empty()) continue;
          handles.push_back(
              client_->get().PushAsync(layout.tables[t].name, table.ids, table.grads, step));
        }
      }
      if (!s.ok() || wait) {
        const absl::Status pushed = WaitAll(&handles);
        if (s.ok()) s = pushed;
      }
    }
    ThrowIfError(s);
    return py::make_tuple(absl::ToDoubleSeconds(exchanged - start),
                          absl::ToDoubleSeconds(absl::Now() - exchanged));
  }

  std::shared_ptr<Client> client_;
  std::unique_ptr<worker::SparseBatch> batch_;
  std::vector<PsHandle> handles_;
  std::vector<PsHandle> push_handles_;
  std::vector<worker::OwnedGradients> owned_;  // BSP: what this rank pushes
  bool prepared_ = false;
  bool pulling_ = false;
  bool pulled_ = false;
  bool pushed_ = false;
};

class ServingClient {
 public:
  ServingClient(const std::string& address, double deadline_s, const std::string& tls_ca,
                const std::string& tls_cert, const std::string& tls_key)
      : address_(address), deadline_(absl::Seconds(deadline_s)) {
    if (address.empty()) ThrowInvalid("ServingClient needs the follower's address");
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(256 << 20);
    args.SetMaxSendMessageSize(256 << 20);
    stub_ = v1::ServingService::NewStub(grpc::CreateCustomChannel(
        address, OrInsecure(ChannelCredentials(tls_ca, tls_cert, tls_key)), args));
  }

  py::array_t<float> Lookup(const std::string& table, const py::handle& ids_array) {
    const std::vector<uint64_t> ids = IdsFromArray(ids_array, "ids");
    v1::LookupRequest request;
    request.set_table(table);
    request.set_ids(reinterpret_cast<const char*>(ids.data()), ids.size() * 8);
    v1::LookupResponse response;
    absl::Status s;
    {
      py::gil_scoped_release unlocked;
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
      s = FromGrpcStatus(stub_->Lookup(&context, request, &response), &context);
    }
    if (!s.ok()) {
      ThrowIfError(absl::Status(s.code(), absl::StrCat("Lookup on ", address_, ": ", s.message())));
    }
    const size_t floats = response.values().size() / sizeof(float);
    const size_t dim = ids.empty() ? 0 : floats / ids.size();
    py::array_t<float> out({static_cast<py::ssize_t>(ids.size()), static_cast<py::ssize_t>(dim)});
    if (floats > 0) std::memcpy(out.mutable_data(), response.values().data(), floats * 4);
    return out;
  }

  // The current model version's dense parameters: (little-endian float32 bytes, its
  // checkpoint, its step).
  py::tuple DenseParameters() {
    v1::GetDenseParametersResponse response;
    absl::Status s;
    {
      py::gil_scoped_release unlocked;
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
      s = FromGrpcStatus(
          stub_->GetDenseParameters(&context, v1::GetDenseParametersRequest(), &response),
          &context);
    }
    if (!s.ok()) {
      ThrowIfError(absl::Status(
          s.code(), absl::StrCat("GetDenseParameters on ", address_, ": ", s.message())));
    }
    return py::make_tuple(py::bytes(response.dense_parameters()), response.version().checkpoint(),
                          response.version().dense_step());
  }

 private:
  std::string address_;
  absl::Duration deadline_;
  std::unique_ptr<v1::ServingService::Stub> stub_;
};

}  // namespace

void BindPs(py::module_& m) {
  py::class_<Client, std::shared_ptr<Client>>(m, "Client")
      .def(py::init<const std::string&, const std::map<uint32_t, std::string>&,
                    std::optional<uint64_t>, uint64_t, uint64_t, double, double, const std::string&,
                    const std::string&, const std::string&, const std::string&>(),
           py::arg("coordinator") = "", py::arg("shards") = std::map<uint32_t, std::string>{},
           py::arg("worker_id") = py::none(), py::arg("first_sequence") = 1, py::arg("attempt") = 0,
           py::arg("deadline_s") = 30.0, py::arg("connect_timeout_s") = 30.0,
           py::arg("tls_ca") = "", py::arg("tls_cert") = "", py::arg("tls_key") = "",
           py::arg("job") = "")
      .def("create_table", &Client::CreateTable, py::arg("text"))
      .def("table", &Client::Table, py::arg("name"))
      .def("pull", &Client::Pull, py::arg("table"), py::arg("ids"), py::arg("step") = 0)
      .def("push", &Client::Push, py::arg("table"), py::arg("ids"), py::arg("grads"),
           py::arg("step") = 0)
      .def("checksum", &Client::Checksum, py::arg("table") = "")
      .def("refresh", &Client::Refresh)
      .def_property_readonly("shards", &Client::Shards)
      .def_property_readonly("worker_id", &Client::worker_id);

  py::class_<SparseLookup>(m, "SparseLookup")
      .def(py::init<std::shared_ptr<Client>, const std::vector<std::string>&,
                    const std::vector<int>&, const std::vector<std::string>&>(),
           py::arg("client"), py::arg("tables"), py::arg("feature_tables"),
           py::arg("poolings") = std::vector<std::string>{})
      .def("prepare", &SparseLookup::Prepare, py::arg("ids"), py::arg("offsets"),
           py::arg("names") = std::vector<std::string>{})
      .def("start_pull", &SparseLookup::StartPull, py::arg("step") = 0)
      .def("finish_pull", &SparseLookup::FinishPull)
      .def("pool", &SparseLookup::Pool)
      .def("push", &SparseLookup::Push, py::arg("grads"), py::arg("step") = 0,
           py::arg("scale") = 1.0f, py::arg("collective") = py::none(), py::arg("wait") = true)
      .def("push_pooled", &SparseLookup::PushPooled, py::arg("d_pooled"), py::arg("step") = 0,
           py::arg("scale") = 1.0f, py::arg("collective") = py::none(), py::arg("wait") = true)
      .def("finish_push", &SparseLookup::FinishPush)
      .def_property_readonly("batch_size", &SparseLookup::batch_size)
      .def_property_readonly("unique_ids", &SparseLookup::unique_ids)
      .def_property_readonly("pushed", &SparseLookup::pushed)
      .def_property_readonly("pooled_width", &SparseLookup::pooled_width);

  py::class_<ServingClient>(m, "ServingClient")
      .def(py::init<const std::string&, double, const std::string&, const std::string&,
                    const std::string&>(),
           py::arg("address"), py::arg("deadline_s") = 10.0, py::arg("tls_ca") = "",
           py::arg("tls_cert") = "", py::arg("tls_key") = "")
      .def("lookup", &ServingClient::Lookup, py::arg("table"), py::arg("ids"))
      .def("dense_parameters", &ServingClient::DenseParameters);
}

}  // namespace ember::python
