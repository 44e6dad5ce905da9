// Copyright 2026 The Ember Authors.
//
// Follower::Predict: rows -> examples (ServedModel::Encode) -> unique IDs per table
// and their rows from the follower's store -> pooled features -> the served tower's
// batch-invariant Score -> click probabilities. The same parsing, pooling and tower as
// the worker's evaluation (common/model/).

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clip.h"
#include "common/model/sparse_batch.h"
#include "common/status_macros.h"
#include "server/serving/follower.h"

namespace ember {

absl::Status Follower::Predict(const v1::PredictRequest& request, v1::PredictResponse* response) {
  if (request.rows().empty()) return absl::InvalidArgumentError("Predict needs at least one row");
  if (static_cast<uint32_t>(request.rows_size()) > options_.max_predict_rows) {
    return absl::InvalidArgumentError(absl::StrCat("Predict of ", request.rows_size(),
                                                   " rows; the most is ", options_.max_predict_rows,
                                                   " (--max_predict_rows)"));
  }
  // One snapshot of the version and its model: a newer version loaded meanwhile
  // scores the next call.
  std::shared_ptr<const ServedModel> model;
  {
    absl::MutexLock lock(&mu_);
    if (dense_.checkpoint.empty()) {
      return absl::UnavailableError(
          "no model version loaded yet (no checkpoint with dense parameters): Predict waits for "
          "the training job's first checkpoint");
    }
    if (!dense_.model.ok()) return dense_.model.status();
    model = *dense_.model;
    *response->mutable_version() = VersionLocked();
  }

  model::ExampleBatch batch;
  std::vector<uint32_t> rows;
  EMBER_RETURN_IF_ERROR(model->Encode(request, &batch, &rows, response));
  predict_rows_refused_.fetch_add(response->errors_size(), std::memory_order_relaxed);

  model::SparseBatch sparse(model->layout());
  sparse.Build(batch);
  uint32_t unknown_ids = 0;
  {
    absl::ReaderMutexLock store(&store_mu_);
    if (stopped_) return absl::UnavailableError("ember-serving is stopping");
    std::vector<uint8_t> unknown;
    for (int t = 0; t < sparse.num_tables(); ++t) {
      model::SparseBatch::TableData& table = sparse.table(t);
      const std::string& name = model->layout().tables[t].name;
      const size_t dim = static_cast<size_t>(model->layout().tables[t].dim);
      // In parts of at most max_batch_keys ids, the store's batch limit.
      for (size_t first = 0; first < table.ids.size(); first += options_.max_batch_keys) {
        const size_t n = std::min<size_t>(options_.max_batch_keys, table.ids.size() - first);
        absl::Span<float> out = absl::MakeSpan(table.rows).subspan(first * dim, n * dim);
        const absl::Status pulled = storage_->store()->Pull(
            name, absl::MakeConstSpan(table.ids).subspan(first, n), out, &unknown);
        if (absl::IsNotFound(pulled)) {
          return absl::UnavailableError(absl::StrCat(
              "table '", ClipForMessage(name), "' of model version ",
              response->version().checkpoint(), " is not in the follower's store yet"));
        }
        EMBER_RETURN_IF_ERROR(pulled);
        for (size_t i = 0; i < unknown.size(); ++i) {
          if (unknown[i] == 0) continue;
          ++unknown_ids;
          if (options_.unknown_as_zeros) std::fill_n(out.begin() + i * dim, dim, 0.0f);
        }
      }
    }
  }

  std::vector<float> pooled(static_cast<size_t>(batch.size) * model->layout().pooled_width);
  std::vector<float> logits(batch.size);
  sparse.Pool(absl::MakeSpan(pooled));
  model->Score(batch, pooled, absl::MakeSpan(logits));

  response->mutable_probabilities()->Resize(request.rows_size(),
                                            std::numeric_limits<float>::quiet_NaN());
  for (int e = 0; e < batch.size; ++e) {
    response->set_probabilities(static_cast<int>(rows[e]), model::ClickProbability(logits[e]));
  }
  response->set_unknown_ids(unknown_ids);
  predict_rows_scored_.fetch_add(batch.size, std::memory_order_relaxed);
  return absl::OkStatus();
}

}  // namespace ember
