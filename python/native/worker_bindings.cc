// Copyright 2026 The Ember Authors.
//
// Collective (Gloo, rendezvous through the coordinator) and JobClient (the job
// protocol: JoinJob, Checkpoint, GetJob, FinishJob) (bindings.h).

#include <cstring>

#include "absl/random/distributions.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ember/v1/checkpoint.pb.h"
#include "ember/v1/coordinator.pb.h"
#include "python/native/bindings.h"
#include "worker/job/job_client.h"

namespace ember::python {
namespace {

using worker::JobClient;

class PyCollective {
 public:
  PyCollective(const std::string& coordinator, const std::string& job, uint64_t generation,
               int rank, int world_size, const std::string& host, double timeout_s,
               const std::string& tls_ca, const std::string& tls_cert, const std::string& tls_key) {
    worker::CollectiveOptions options;
    options.coordinator_address = coordinator;
    options.channel_credentials = ChannelCredentials(tls_ca, tls_cert, tls_key);
    options.cluster_token = ClusterTokenFromEnv(options.channel_credentials != nullptr);
    options.job = job;
    options.generation = generation;
    options.rank = rank;
    options.world_size = world_size;
    options.host = host;
    if (!(timeout_s > 0)) ThrowInvalid("timeout_s must be > 0");
    options.timeout = absl::Seconds(timeout_s);
    absl::StatusOr<std::unique_ptr<worker::Collective>> c;
    {
      py::gil_scoped_release unlocked;
      c = worker::Collective::Connect(options);
    }
    if (!c.ok()) {
      ThrowIfError(absl::Status(
          c.status().code(),
          absl::StrCat("worker rendezvous (job '", job, "', generation ", generation, ", rank ",
                       rank, " of ", world_size, "): ", c.status().message())));
    }
    collective_ = std::move(*c);
  }

  worker::Collective& get() { return *collective_; }

  // In place: every rank gets the same bits (fixed reduction order).
  void AllReduceSum(const py::handle& handle) {
    if (!py::isinstance<py::array>(handle)) ThrowInvalid("all_reduce_sum needs a float32 array");
    py::array array = py::reinterpret_borrow<py::array>(handle);
    if (!array.dtype().is(py::dtype::of<float>())) {
      ThrowInvalid(absl::StrCat("all_reduce_sum: expected float32, got ",
                                std::string(py::str(py::object(array.dtype())))));
    }
    if (!(array.flags() & py::array::c_style) || !array.writeable()) {
      ThrowInvalid(
          "all_reduce_sum: the array must be C-contiguous and writeable (it is summed in place)");
    }
    float* data = static_cast<float*>(array.mutable_data());
    const size_t n = static_cast<size_t>(array.size());
    absl::Status s;
    {
      py::gil_scoped_release unlocked;
      s = collective_->AllReduceSum(absl::MakeSpan(data, n));
    }
    ThrowIfError(s);
  }

  void Barrier() {
    absl::Status s;
    {
      py::gil_scoped_release unlocked;
      s = collective_->Barrier();
    }
    ThrowIfError(s);
  }

  std::vector<py::bytes> AllToAll(const std::vector<std::string>& send) {
    absl::StatusOr<std::vector<std::string>> recv;
    {
      py::gil_scoped_release unlocked;
      recv = collective_->AllToAll(send);
    }
    std::vector<py::bytes> out;
    for (const std::string& r : ValueOrThrow(std::move(recv))) out.emplace_back(r);
    return out;
  }

  int rank() const { return collective_->rank(); }
  int world_size() const { return collective_->world_size(); }

 private:
  std::unique_ptr<worker::Collective> collective_;
};

py::dict StateDict(const v1::WorkerState& s) {
  py::dict d;
  d["step"] = s.step();
  d["examples"] = s.examples();
  d["world_size"] = s.world_size();
  d["epoch"] = s.epoch();
  d["dense_parameters"] = py::bytes(s.dense_parameters());
  d["dense_optimizer_state"] = py::bytes(s.dense_optimizer_state());
  d["config_digest"] = s.config_digest();
  d["config"] = py::bytes(s.config());
  py::list cursors;
  for (const v1::WorkerCursor& c : s.cursors()) {
    py::dict cd;
    cd["rank"] = c.rank();
    cd["epoch"] = c.epoch();
    cd["file_index"] = c.file_index();
    cd["line"] = c.line();
    cd["leaving"] = c.leaving();
    cursors.append(cd);
  }
  d["cursors"] = cursors;
  // The data position's progress (a serialized DataProgress: Reader.resume_from reads
  // it) and the examples of each epoch over all workers.
  d["data"] = py::bytes(s.data().SerializeAsString());
  d["epoch_examples"] = std::vector<uint64_t>(s.epoch_examples().begin(), s.epoch_examples().end());
  return d;
}

v1::WorkerState StateFromDict(const py::dict& d) {
  v1::WorkerState s;
  try {
    s.set_step(d["step"].cast<uint64_t>());
    s.set_examples(d["examples"].cast<uint64_t>());
    s.set_world_size(d["world_size"].cast<uint32_t>());
    s.set_epoch(d["epoch"].cast<uint32_t>());
    s.set_dense_parameters(d["dense_parameters"].cast<std::string>());
    s.set_dense_optimizer_state(d["dense_optimizer_state"].cast<std::string>());
    s.set_config_digest(d["config_digest"].cast<uint64_t>());
    s.set_config(d["config"].cast<std::string>());
    for (const py::handle& h : d["cursors"].cast<py::list>()) {
      const py::dict c = h.cast<py::dict>();
      v1::WorkerCursor* cursor = s.add_cursors();
      cursor->set_rank(c["rank"].cast<uint32_t>());
      cursor->set_epoch(c["epoch"].cast<uint32_t>());
      cursor->set_file_index(c["file_index"].cast<int32_t>());
      cursor->set_line(c["line"].cast<uint64_t>());
      if (c.contains("leaving")) cursor->set_leaving(c["leaving"].cast<bool>());
    }
    // "data": the DataProgress bytes of the epoch being read (Reader.resume_from's
    // "progress"; None or one of an earlier epoch: the epoch began under this world
    // size, nothing from earlier ones), "data_files": the dataset's files.
    v1::DataProgress* data = s.mutable_data();
    if (d.contains("data") && !d["data"].is_none() &&
        !data->ParseFromString(d["data"].cast<std::string>())) {
      ThrowInvalid("worker state: \"data\" is not a serialized DataProgress");
    }
    if (data->epoch() < s.epoch()) {
      data->Clear();
      data->set_epoch(s.epoch());
    }
    data->clear_files();
    if (d.contains("data_files")) {
      for (const std::string& f : d["data_files"].cast<std::vector<std::string>>()) {
        data->add_files(f);
      }
    }
    if (d.contains("epoch_examples")) {
      for (uint64_t n : d["epoch_examples"].cast<std::vector<uint64_t>>()) s.add_epoch_examples(n);
    }
  } catch (const py::error_already_set& e) {
    ThrowInvalid(absl::StrCat("worker state: ", e.what()));
  } catch (const py::cast_error& e) {
    ThrowInvalid(absl::StrCat("worker state: a field has the wrong type: ", e.what()));
  }
  return s;
}

class PyJobClient {
 public:
  PyJobClient(const std::string& coordinator, const std::string& tls_ca,
              const std::string& tls_cert, const std::string& tls_key)
      : jobs_(ValueOrThrow(
            JobClient::Create(coordinator, ChannelCredentials(tls_ca, tls_cert, tls_key)))) {}

  py::dict Join(const std::string& job, uint64_t generation, uint32_t rank, uint32_t world_size,
                const std::string& resume_from, uint64_t config_digest, const py::bytes& config,
                uint64_t after_attempt, const std::string& reason, double timeout_s,
                double unreachable_timeout_s, py::object report, const std::string& rows,
                uint32_t min_workers, uint32_t max_workers, const std::string& member,
                uint64_t join_at_step, const std::string& run_id, bool own_tables) {
    v1::JoinJobRequest request;
    // A run named by its id (a Kubernetes Job's UID): the coordinator answers its
    // generation, which later joins give instead.
    request.set_run_id(run_id);
    if (max_workers > 0) {
      // Elastic: the coordinator assigns the rank and the world size per attempt.
      request.set_min_workers(min_workers);
      request.set_max_workers(max_workers);
      request.set_member(member);
      request.set_join_at_step(join_at_step);
      // This process's id for its life: a member joining again from a restarted process
      // ends the attempt it was in (as ember-worker's).
      static const uint64_t process = absl::Uniform<uint64_t>(absl::BitGen(), 1, ~uint64_t{0});
      request.set_process(process);
    }
    if (rows == "continue") {
      request.set_rows(v1::JoinJobRequest::START_ROWS_CONTINUE);
    } else if (rows == "fresh") {
      request.set_rows(v1::JoinJobRequest::START_ROWS_FRESH);
    } else if (!rows.empty()) {
      ThrowInvalid(absl::StrCat("rows must be \"continue\" or \"fresh\" (or empty), not '",
                                rows.substr(0, 64), "'"));
    }
    request.set_job(job);
    request.set_generation(generation);
    if (max_workers == 0) {
      request.set_rank(rank);
      request.set_world_size(world_size);
    }
    request.set_resume_from(resume_from);
    request.set_own_tables(own_tables);
    request.set_config_digest(config_digest);
    request.set_config(std::string(config));
    request.set_after_attempt(after_attempt);
    request.set_reason(reason);
    JobClient::JoinWait wait;
    wait.timeout = absl::Seconds(timeout_s);
    wait.unreachable_timeout = absl::Seconds(unreachable_timeout_s);
    if (!report.is_none()) {
      wait.report = [report](const std::string& line) {
        py::gil_scoped_acquire locked;
        try {
          report(line);
        } catch (const py::error_already_set&) {
          // A failing progress callback must not end the join.
        }
      };
    }
    absl::StatusOr<v1::JoinJobResponse> response;
    {
      py::gil_scoped_release unlocked;
      response = jobs_->Join(request, wait);
    }
    if (!response.ok()) {
      ThrowIfError(
          absl::Status(response.status().code(),
                       absl::StrCat("joining job '", job, "': ", response.status().message())));
    }
    py::dict d;
    d["attempt"] = response->attempt();
    d["checkpoint"] = response->checkpoint();
    d["checkpoints"] = response->checkpoints();
    d["generation"] = response->generation();
    d["tables_job"] = response->tables_job();
    d["rank"] = max_workers > 0 ? response->rank() : rank;
    d["world_size"] = max_workers > 0 ? response->world_size() : world_size;
    d["state"] = response->checkpoint().empty() ? py::object(py::none())
                                                : py::object(StateDict(response->state()));
    return d;
  }

  py::dict Checkpoint(const std::string& job, uint64_t generation, uint64_t attempt,
                      const py::dict& state, double timeout_s, bool resize) {
    v1::CheckpointRequest request;
    request.set_job(job);
    request.set_generation(generation);
    request.set_attempt(attempt);
    request.set_allow_incremental(true);
    *request.mutable_state() = StateFromDict(state);
    // An elastic resize: the attempt ends at this cut; the cursors marked leaving exit.
    request.set_resize(resize);
    for (const v1::WorkerCursor& c : request.state().cursors()) {
      if (c.leaving()) request.add_leaving_ranks(c.rank());
    }
    absl::StatusOr<v1::CheckpointManifest> manifest;
    {
      py::gil_scoped_release unlocked;
      manifest = jobs_->Checkpoint(request, absl::Seconds(timeout_s));
    }
    ThrowIfError(manifest.status());
    uint64_t bytes = 0;
    for (const v1::ShardSnapshot& shard : manifest->shards()) bytes += shard.bytes();
    py::dict d;
    d["name"] = manifest->name();
    d["step"] = manifest->step();
    d["incremental"] = manifest->incremental();
    d["bytes"] = bytes;
    d["seconds"] = manifest->seconds();
    return d;
  }

  py::dict GetJob(const std::string& job, double timeout_s) {
    absl::StatusOr<v1::GetJobResponse> r;
    {
      py::gil_scoped_release unlocked;
      r = jobs_->GetJob(job, absl::Seconds(timeout_s));
    }
    ThrowIfError(r.status());
    py::dict d;
    d["job"] = r->job();
    d["generation"] = r->generation();
    d["attempt"] = r->attempt();
    d["phase"] = v1::GetJobResponse::Phase_Name(r->phase());
    d["world_size"] = r->world_size();
    d["checkpoint_requested"] = r->checkpoint_requested();
    d["latest_checkpoint"] = r->latest_checkpoint();
    d["recoveries"] = r->recoveries();
    d["failure"] = r->failure();
    d["restored_from"] = r->restored_from();
    // Elastic runs: the workers waiting for a place (rank 0 votes a resize for them).
    py::list pending;
    for (const v1::PendingWorker& p : r->pending()) {
      py::dict w;
      w["member"] = p.member();
      w["join_at_step"] = p.join_at_step();
      pending.append(w);
    }
    d["pending"] = pending;
    d["resizes"] = r->resizes();
    return d;
  }

  void Finish(const std::string& job, uint64_t generation, uint64_t attempt, double timeout_s) {
    v1::FinishJobRequest request;
    request.set_job(job);
    request.set_generation(generation);
    request.set_attempt(attempt);
    absl::Status s;
    {
      py::gil_scoped_release unlocked;
      s = jobs_->Finish(request, absl::Seconds(timeout_s));
    }
    ThrowIfError(s);
  }

  void AwaitFinished(const std::string& job, uint64_t generation, uint64_t attempt,
                     double timeout_s) {
    absl::Status s;
    {
      py::gil_scoped_release unlocked;
      s = jobs_->AwaitFinished(job, generation, attempt, absl::Seconds(timeout_s));
    }
    ThrowIfError(s);
  }

 private:
  std::unique_ptr<JobClient> jobs_;
};

}  // namespace

worker::Collective* CollectiveOf(const py::object& object) {
  if (!py::isinstance<PyCollective>(object)) {
    ThrowInvalid("expected an ember Collective (or None)");
  }
  return &object.cast<PyCollective&>().get();
}

void BindWorker(py::module_& m) {
  py::class_<PyCollective>(m, "Collective")
      .def(py::init<const std::string&, const std::string&, uint64_t, int, int, const std::string&,
                    double, const std::string&, const std::string&, const std::string&>(),
           py::arg("coordinator") = "", py::arg("job") = "ember", py::arg("generation") = 0,
           py::arg("rank") = 0, py::arg("world_size") = 1, py::arg("host") = "127.0.0.1",
           py::arg("timeout_s") = 60.0, py::arg("tls_ca") = "", py::arg("tls_cert") = "",
           py::arg("tls_key") = "")
      .def("all_reduce_sum", &PyCollective::AllReduceSum, py::arg("array"))
      .def("barrier", &PyCollective::Barrier)
      .def("all_to_all", &PyCollective::AllToAll, py::arg("send"))
      .def_property_readonly("rank", &PyCollective::rank)
      .def_property_readonly("world_size", &PyCollective::world_size);

  py::class_<PyJobClient>(m, "JobClient")
      .def(py::init<const std::string&, const std::string&, const std::string&,
                    const std::string&>(),
           py::arg("coordinator"), py::arg("tls_ca") = "", py::arg("tls_cert") = "",
           py::arg("tls_key") = "")
      .def("join", &PyJobClient::Join, py::arg("job"), py::arg("generation"), py::arg("rank"),
           py::arg("world_size"), py::arg("resume_from") = "", py::arg("config_digest") = 0,
           py::arg("config") = py::bytes(), py::arg("after_attempt") = 0, py::arg("reason") = "",
           py::arg("timeout_s") = 600.0, py::arg("unreachable_timeout_s") = 60.0,
           py::arg("report") = py::none(), py::arg("rows") = "", py::arg("min_workers") = 0,
           py::arg("max_workers") = 0, py::arg("member") = "", py::arg("join_at_step") = 0,
           py::arg("run_id") = "", py::arg("own_tables") = false)
      .def("checkpoint", &PyJobClient::Checkpoint, py::arg("job"), py::arg("generation"),
           py::arg("attempt"), py::arg("state"), py::arg("timeout_s") = 600.0,
           py::arg("resize") = false)
      .def("get_job", &PyJobClient::GetJob, py::arg("job"), py::arg("timeout_s") = 5.0)
      .def("finish", &PyJobClient::Finish, py::arg("job"), py::arg("generation"),
           py::arg("attempt"), py::arg("timeout_s") = 30.0)
      .def("await_finished", &PyJobClient::AwaitFinished, py::arg("job"), py::arg("generation"),
           py::arg("attempt"), py::arg("timeout_s") = 600.0);
}

}  // namespace ember::python
