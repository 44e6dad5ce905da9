// Copyright 2026 The Ember Authors.

#include "worker/training/sparse_exchange.h"

#include <cstring>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/status_macros.h"

namespace ember::worker {
namespace {

// Message to one rank: for each table in order, [u32 n][n x u64 ids][n x dim x f32].
void Append(std::string* out, const void* data, size_t bytes) {
  out->append(static_cast<const char*>(data), bytes);
}

class Cursor {
 public:
  explicit Cursor(const std::string& bytes) : p_(bytes.data()), left_(bytes.size()) {}
  bool Read(void* out, size_t bytes) {
    if (bytes > left_) return false;
    std::memcpy(out, p_, bytes);
    p_ += bytes;
    left_ -= bytes;
    return true;
  }
  const char* Take(size_t bytes) {
    if (bytes > left_) return nullptr;
    const char* at = p_;
    p_ += bytes;
    left_ -= bytes;
    return at;
  }
  size_t left() const { return left_; }

 private:
  const char* p_;
  size_t left_;
};

// Splits every table's ids by owner rank, keeping batch order within each owner:
// message r holds, per table, a count, the ids and their gradients.
std::vector<std::string> EncodeByOwner(const SparseBatch& batch, int world) {
  const int num_tables = batch.num_tables();
  std::vector<std::string> send(world);
  std::vector<std::vector<uint32_t>> by_owner(world);
  for (int t = 0; t < num_tables; ++t) {
    const SparseBatch::TableData& table = batch.table(t);
    const size_t dim = batch.layout().tables[t].dim;
    for (auto& v : by_owner) v.clear();
    for (uint32_t i = 0; i < table.ids.size(); ++i) {
      by_owner[OwnerRank(table.ids[i], world)].push_back(i);
    }
    for (int r = 0; r < world; ++r) {
      const uint32_t n = static_cast<uint32_t>(by_owner[r].size());
      Append(&send[r], &n, sizeof(n));
      for (uint32_t i : by_owner[r]) Append(&send[r], &table.ids[i], sizeof(uint64_t));
      for (uint32_t i : by_owner[r]) {
        Append(&send[r], table.grads.data() + i * dim, dim * sizeof(float));
      }
    }
  }

  return send;
}

// Sums the gradients of each id received from all ranks into (*out)[table], in rank
// order (the summation order is fixed). DATA_LOSS for a truncated or overlong message.
absl::Status SumReceived(const SparseBatch& batch, const std::vector<std::string>& recv,
                         std::vector<OwnedGradients>* out) {
  const int world = static_cast<int>(recv.size());
  const int num_tables = batch.num_tables();
  std::vector<Cursor> cursors;
  cursors.reserve(world);
  for (const std::string& r : recv) cursors.emplace_back(r);
  absl::flat_hash_map<uint64_t, uint32_t> position;
  for (int t = 0; t < num_tables; ++t) {
    const size_t dim = batch.layout().tables[t].dim;
    OwnedGradients& owned = (*out)[t];
    owned.ids.clear();
    owned.grads.clear();
    position.clear();
    for (int r = 0; r < world; ++r) {  // rank order: the summation order is fixed
      uint32_t n = 0;
      if (!cursors[r].Read(&n, sizeof(n))) {
        return absl::DataLossError(
            absl::StrCat("sparse exchange: truncated message from rank ", r));
      }
      const char* ids = cursors[r].Take(size_t{n} * sizeof(uint64_t));
      const char* grads = cursors[r].Take(size_t{n} * dim * sizeof(float));
      if (ids == nullptr || grads == nullptr) {
        return absl::DataLossError(
            absl::StrCat("sparse exchange: truncated message from rank ", r));
      }
      for (uint32_t i = 0; i < n; ++i) {
        uint64_t id;
        std::memcpy(&id, ids + i * sizeof(uint64_t), sizeof(id));
        auto [it, inserted] = position.try_emplace(id, static_cast<uint32_t>(owned.ids.size()));
        if (inserted) {
          owned.ids.push_back(id);
          owned.grads.resize(owned.grads.size() + dim, 0.0f);
        }
        float* sum = owned.grads.data() + size_t{it->second} * dim;
        for (size_t j = 0; j < dim; ++j) {
          float g;
          std::memcpy(&g, grads + (i * dim + j) * sizeof(float), sizeof(g));
          sum[j] += g;
        }
      }
    }
  }
  for (int r = 0; r < world; ++r) {
    if (cursors[r].left() != 0) {
      return absl::DataLossError(absl::StrCat("sparse exchange: trailing bytes from rank ", r));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int OwnerRank(uint64_t id, int world_size) {
  return static_cast<int>(Mix64Alt(id) % static_cast<uint64_t>(world_size));
}

absl::Status ReduceSparseGradients(Collective& collective, const SparseBatch& batch,
                                   std::vector<OwnedGradients>* out) {
  const int world = collective.world_size();
  const int num_tables = batch.num_tables();
  out->resize(num_tables);
  if (world == 1) {
    for (int t = 0; t < num_tables; ++t) {
      (*out)[t].ids = batch.table(t).ids;
      (*out)[t].grads = batch.table(t).grads;
    }
    return absl::OkStatus();
  }
  EMBER_ASSIGN_OR_RETURN(std::vector<std::string> recv,
                         collective.AllToAll(EncodeByOwner(batch, world)));
  if (static_cast<int>(recv.size()) != world) {
    return absl::DataLossError("sparse exchange: wrong number of messages");
  }
  return SumReceived(batch, recv, out);
}

}  // namespace ember::worker
