// Copyright 2026 The Ember Authors.

#include "server/store/fault_injection_fs.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <utility>

namespace ember {

class FaultState {
 public:
  // Returns an injected error (and counts it) while the matching mode is on or when the
  // rate draws a failure, else OK.
  rocksdb::IOStatus MaybeFailWrite();
  rocksdb::IOStatus MaybeFailRead();

  std::atomic<bool> fail_writes{false};
  std::atomic<bool> fail_reads{false};
  // A call fails when the hash of its draw is below the threshold (rate * 2^64).
  std::atomic<uint64_t> write_threshold{0};
  std::atomic<uint64_t> read_threshold{0};
  std::atomic<uint64_t> seed{0};
  std::atomic<uint64_t> draws{0};
  std::atomic<bool> retryable{true};
  std::atomic<int64_t> write_failures{0};
  std::atomic<int64_t> read_failures{0};
};

namespace {

using rocksdb::DataVerificationInfo;
using rocksdb::FSReadRequest;
using rocksdb::IODebugContext;
using rocksdb::IOHandleDeleter;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

class FaultWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultWritableFile(std::unique_ptr<rocksdb::FSWritableFile> file,
                    std::shared_ptr<FaultState> state)
      : FSWritableFileOwnerWrapper(std::move(file)), state_(std::move(state)) {}

  IOStatus Append(const Slice& data, const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = state_->MaybeFailWrite();
    return s.ok() ? FSWritableFileOwnerWrapper::Append(data, options, dbg) : s;
  }
  IOStatus Append(const Slice& data, const IOOptions& options, const DataVerificationInfo& info,
                  IODebugContext* dbg) override {
    IOStatus s = state_->MaybeFailWrite();
    return s.ok() ? FSWritableFileOwnerWrapper::Append(data, options, info, dbg) : s;
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& options,
                            IODebugContext* dbg) override {
    IOStatus s = state_->MaybeFailWrite();
    return s.ok() ? FSWritableFileOwnerWrapper::PositionedAppend(data, offset, options, dbg) : s;
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& options,
                            const DataVerificationInfo& info, IODebugContext* dbg) override {
    IOStatus s = state_->MaybeFailWrite();
    return s.ok() ? FSWritableFileOwnerWrapper::PositionedAppend(data, offset, options, info, dbg)
                  : s;
  }
  IOStatus Flush(const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = state_->MaybeFailWrite();
    return s.ok() ? FSWritableFileOwnerWrapper::Flush(options, dbg) : s;
  }
  IOStatus Sync(const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = state_->MaybeFailWrite();
    return s.ok() ? FSWritableFileOwnerWrapper::Sync(options, dbg) : s;
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    IOStatus s = state_->MaybeFailWrite();
    return s.ok() ? FSWritableFileOwnerWrapper::Fsync(options, dbg) : s;
  }
  IOStatus RangeSync(uint64_t offset, uint64_t nbytes, const IOOptions& options,
                     IODebugContext* dbg) override {
    IOStatus s = state_->MaybeFailWrite();
    return s.ok() ? FSWritableFileOwnerWrapper::RangeSync(offset, nbytes, options, dbg) : s;
  }

 private:
  const std::shared_ptr<FaultState> state_;
};

class FaultRandomAccessFile : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  FaultRandomAccessFile(std::unique_ptr<rocksdb::FSRandomAccessFile> file,
                        std::shared_ptr<FaultState> state)
      : FSRandomAccessFileOwnerWrapper(std::move(file)), state_(std::move(state)) {}

  IOStatus Read(uint64_t offset, size_t n, const IOOptions& options, Slice* result, char* scratch,
                IODebugContext* dbg) const override {
    IOStatus s = state_->MaybeFailRead();
    if (!s.ok()) {
      *result = Slice();
      return s;
    }
    return FSRandomAccessFileOwnerWrapper::Read(offset, n, options, result, scratch, dbg);
  }
  IOStatus MultiRead(FSReadRequest* reqs, size_t num_reqs, const IOOptions& options,
                     IODebugContext* dbg) override {
    IOStatus s = state_->MaybeFailRead();
    if (!s.ok()) {
      for (size_t i = 0; i < num_reqs; ++i) {
        reqs[i].result = Slice();
        reqs[i].status = s;
      }
      return s;
    }
    return FSRandomAccessFileOwnerWrapper::MultiRead(reqs, num_reqs, options, dbg);
  }
  // On a non-OK return RocksDB does not wait for the callback, so none is made.
  IOStatus ReadAsync(FSReadRequest& req, const IOOptions& opts,
                     std::function<void(const FSReadRequest&, void*)> cb, void* cb_arg,
                     void** io_handle, IOHandleDeleter* del_fn, IODebugContext* dbg) override {
    IOStatus s = state_->MaybeFailRead();
    if (!s.ok()) return s;
    return FSRandomAccessFileOwnerWrapper::ReadAsync(req, opts, std::move(cb), cb_arg, io_handle,
                                                     del_fn, dbg);
  }

 private:
  const std::shared_ptr<FaultState> state_;
};

class FaultSequentialFile : public rocksdb::FSSequentialFileOwnerWrapper {
 public:
  FaultSequentialFile(std::unique_ptr<rocksdb::FSSequentialFile> file,
                      std::shared_ptr<FaultState> state)
      : FSSequentialFileOwnerWrapper(std::move(file)), state_(std::move(state)) {}

  IOStatus Read(size_t n, const IOOptions& options, Slice* result, char* scratch,
                IODebugContext* dbg) override {
    IOStatus s = state_->MaybeFailRead();
    if (!s.ok()) {
      *result = Slice();
      return s;
    }
    return FSSequentialFileOwnerWrapper::Read(n, options, result, scratch, dbg);
  }
  IOStatus PositionedRead(uint64_t offset, size_t n, const IOOptions& options, Slice* result,
                          char* scratch, IODebugContext* dbg) override {
    IOStatus s = state_->MaybeFailRead();
    if (!s.ok()) {
      *result = Slice();
      return s;
    }
    return FSSequentialFileOwnerWrapper::PositionedRead(offset, n, options, result, scratch, dbg);
  }

 private:
  const std::shared_ptr<FaultState> state_;
};

// Wraps a freshly opened writable file, or passes the open error through.
IOStatus WrapWritable(IOStatus s, const std::shared_ptr<FaultState>& state,
                      std::unique_ptr<rocksdb::FSWritableFile>* result) {
  if (s.ok()) *result = std::make_unique<FaultWritableFile>(std::move(*result), state);
  return s;
}

// SplitMix64's finalizer: a well-mixed 64-bit hash of the draw counter.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Whether a call with this failure threshold fails (rate * 2^64; 0 never).
bool Draw(FaultState& state, const std::atomic<uint64_t>& threshold) {
  const uint64_t t = threshold.load(std::memory_order_relaxed);
  if (t == 0) return false;
  const uint64_t draw = state.draws.fetch_add(1, std::memory_order_relaxed);
  return Mix(draw ^ state.seed.load(std::memory_order_relaxed)) < t;
}

uint64_t Threshold(double rate) {
  if (!(rate > 0)) return 0;
  if (rate >= 1) return ~uint64_t{0};
  return static_cast<uint64_t>(std::ldexp(rate, 64));
}

}  // namespace

IOStatus FaultState::MaybeFailWrite() {
  if (!fail_writes.load(std::memory_order_relaxed) && !Draw(*this, write_threshold)) {
    return IOStatus::OK();
  }
  write_failures.fetch_add(1, std::memory_order_relaxed);
  IOStatus s = IOStatus::IOError("injected write fault");
  s.SetRetryable(retryable.load(std::memory_order_relaxed));
  return s;
}

IOStatus FaultState::MaybeFailRead() {
  if (!fail_reads.load(std::memory_order_relaxed) && !Draw(*this, read_threshold)) {
    return IOStatus::OK();
  }
  read_failures.fetch_add(1, std::memory_order_relaxed);
  IOStatus s = IOStatus::IOError("injected read fault");
  s.SetRetryable(retryable.load(std::memory_order_relaxed));
  return s;
}

FaultInjectionFileSystem::FaultInjectionFileSystem(
    const std::shared_ptr<rocksdb::FileSystem>& target)
    : FileSystemWrapper(target), state_(std::make_shared<FaultState>()) {}

void FaultInjectionFileSystem::SetWriteFailure(bool fail) { state_->fail_writes.store(fail); }
void FaultInjectionFileSystem::SetReadFailure(bool fail) { state_->fail_reads.store(fail); }
void FaultInjectionFileSystem::SetRetryableErrors(bool retryable) {
  state_->retryable.store(retryable);
}
void FaultInjectionFileSystem::SetWriteFailureRate(double rate) {
  state_->write_threshold.store(Threshold(rate));
}
void FaultInjectionFileSystem::SetReadFailureRate(double rate) {
  state_->read_threshold.store(Threshold(rate));
}
void FaultInjectionFileSystem::SetFailureSeed(uint64_t seed) { state_->seed.store(seed); }
int64_t FaultInjectionFileSystem::injected_write_failures() const {
  return state_->write_failures.load();
}
int64_t FaultInjectionFileSystem::injected_read_failures() const {
  return state_->read_failures.load();
}

IOStatus FaultInjectionFileSystem::NewSequentialFile(
    const std::string& fname, const rocksdb::FileOptions& file_opts,
    std::unique_ptr<rocksdb::FSSequentialFile>* result, IODebugContext* dbg) {
  IOStatus s = target()->NewSequentialFile(fname, file_opts, result, dbg);
  if (s.ok()) *result = std::make_unique<FaultSequentialFile>(std::move(*result), state_);
  return s;
}

IOStatus FaultInjectionFileSystem::NewRandomAccessFile(
    const std::string& fname, const rocksdb::FileOptions& file_opts,
    std::unique_ptr<rocksdb::FSRandomAccessFile>* result, IODebugContext* dbg) {
  IOStatus s = target()->NewRandomAccessFile(fname, file_opts, result, dbg);
  if (s.ok()) *result = std::make_unique<FaultRandomAccessFile>(std::move(*result), state_);
  return s;
}

IOStatus FaultInjectionFileSystem::NewWritableFile(const std::string& fname,
                                                   const rocksdb::FileOptions& file_opts,
                                                   std::unique_ptr<rocksdb::FSWritableFile>* result,
                                                   IODebugContext* dbg) {
  IOStatus s = state_->MaybeFailWrite();
  if (!s.ok()) return s;
  return WrapWritable(target()->NewWritableFile(fname, file_opts, result, dbg), state_, result);
}

IOStatus FaultInjectionFileSystem::ReopenWritableFile(
    const std::string& fname, const rocksdb::FileOptions& file_opts,
    std::unique_ptr<rocksdb::FSWritableFile>* result, IODebugContext* dbg) {
  IOStatus s = state_->MaybeFailWrite();
  if (!s.ok()) return s;
  return WrapWritable(target()->ReopenWritableFile(fname, file_opts, result, dbg), state_, result);
}

IOStatus FaultInjectionFileSystem::ReuseWritableFile(
    const std::string& fname, const std::string& old_fname, const rocksdb::FileOptions& file_opts,
    std::unique_ptr<rocksdb::FSWritableFile>* result, IODebugContext* dbg) {
  IOStatus s = state_->MaybeFailWrite();
  if (!s.ok()) return s;
  return WrapWritable(target()->ReuseWritableFile(fname, old_fname, file_opts, result, dbg), state_,
                      result);
}

}  // namespace ember
