// Copyright 2026 The Ember Authors.
//
// ServedModel: one model version as Predict scores it: the training job's config (the
// checkpoint's WorkerState.config), its sparse layout and CPU dense towers holding the
// checkpoint's dense parameters. The parsing, pooling and tower are the worker's own
// (common/model/), so a row scores bitwise as the job's evaluation scored it.
//
//   absl::StatusOr<std::unique_ptr<ServedModel>> model = ServedModel::Create(state, name);
//   model::ExampleBatch batch;
//   std::vector<uint32_t> rows;              // request row of each example
//   EMBER_RETURN_IF_ERROR((*model)->Encode(request, &batch, &rows, response));
//   model::SparseBatch sparse((*model)->layout());
//   sparse.Build(batch);  ...look up every table's ids...
//   sparse.Pool(pooled);
//   (*model)->Score(batch, pooled, logits);
//
// Thread-safety: all methods may be called concurrently (Score takes a tower of its
// own from a pool).

#ifndef EMBER_SERVER_SERVING_SERVED_MODEL_H_
#define EMBER_SERVER_SERVING_SERVED_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/model/dense_tower.h"
#include "common/model/example_batch.h"
#include "common/model/sparse_batch.h"
#include "ember/v1/checkpoint.pb.h"
#include "ember/v1/model.pb.h"
#include "ember/v1/serving.pb.h"

namespace ember {

class ServedModel {
 public:
  // The model of `state` (checkpoint `name`, for messages). FAILED_PRECONDITION when
  // the state has no config (a checkpoint of the PS alone or from before configs were
  // stored), when its dense parameters are a Python/PyTorch job's (its
  // dense_optimizer_state is ember/state.py's EMBERPT1 format, or its digest is not
  // the config's: a Python job digests its model signature too) or when their count is
  // not the tower's; INVALID_ARGUMENT when the config does not parse or builds no tower.
  static absl::StatusOr<std::unique_ptr<ServedModel>> Create(const v1::WorkerState& state,
                                                             const std::string& name);

  const v1::ModelConfig& config() const { return config_; }
  const model::SparseLayout& layout() const { return layout_; }

  // Turns request.rows into examples of *batch (Reset first): raw rows through the
  // worker's line parser (columns: request.columns, else the training data's layout),
  // encoded rows as they are. (*rows)[e] is the request index of example e. A bad row
  // is left out and added to response->errors (index and reason). INVALID_ARGUMENT
  // only for a request whose `columns` do not fit the config.
  absl::Status Encode(const v1::PredictRequest& request, model::ExampleBatch* batch,
                      std::vector<uint32_t>* rows, v1::PredictResponse* response) const;

  // The logits of `batch` (DenseTower::Score: batch-invariant) given its pooled
  // features ([batch.size x layout().pooled_width]). REQUIRES: logits.size() == batch.size.
  void Score(const model::ExampleBatch& batch, absl::Span<const float> pooled,
             absl::Span<float> logits) const;

 private:
  ServedModel() = default;
  // Appends encoded row `row` to *batch, or says why it is refused.
  absl::Status AppendEncoded(const v1::EncodedRow& row, model::ExampleBatch* batch) const;
  std::unique_ptr<model::DenseTower> AcquireTower() const;
  void ReleaseTower(std::unique_ptr<model::DenseTower> tower) const;

  std::string name_;
  v1::ModelConfig config_;
  model::SparseLayout layout_;
  int num_dense_ = 0;
  std::vector<std::string> dense_names_;      // the DENSE columns, in order
  std::vector<bool> single_id_;               // per feature: reads a CATEGORICAL column
  std::vector<std::string> default_columns_;  // the training data's layout
  std::vector<float> parameters_;             // the checkpoint's dense parameters

  mutable absl::Mutex mu_;
  mutable std::vector<std::unique_ptr<model::DenseTower>> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ember

#endif  // EMBER_SERVER_SERVING_SERVED_MODEL_H_
