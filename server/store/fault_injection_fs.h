// Copyright 2026 The Ember Authors.
//
// FaultInjectionFileSystem: a rocksdb::FileSystem for tests that forwards to a real one
// and, while a failure mode is switched on, fails reads or writes with an IO error.
// Switching a mode off makes the same files work again, so tests can check that the
// storage engine surfaces the error, keeps what it acknowledged, and recovers.
//
//   auto fs = std::make_shared<FaultInjectionFileSystem>(rocksdb::FileSystem::Default());
//   RocksDbOptions options;
//   options.path = dir;
//   options.file_system = fs;
//   ...
//   fs->SetWriteFailure(true);   // every WAL/SST/MANIFEST write now fails
//   EXPECT_FALSE(backend->Write(batch).ok());
//   fs->SetWriteFailure(false);  // the disk "comes back"
//
// What fails while write failure is on: NewWritableFile / ReopenWritableFile /
// ReuseWritableFile, and Append, PositionedAppend, Flush, Sync, Fsync and RangeSync of
// every writable file (including files opened before the switch). Close, directory
// operations, renames and deletes are not affected.
// What fails while read failure is on: Read and MultiRead of random-access files (SST
// data), ReadAsync, and Read / PositionedRead of sequential files (WAL, MANIFEST).
// Opening files for reading still works.
//
// Rates (SetWriteFailureRate / SetReadFailureRate) fail a random share of the same
// calls instead of all of them: the "low error rate" of a flaky disk.
// Injected errors are IOStatus::IOError("injected write fault" / "injected read fault"),
// marked retryable unless SetRetryableErrors(false). RocksDB treats a retryable write
// error as a hard error that DB::Resume() can clear; a non-retryable one on the WAL is
// fatal and only a reopen clears it.
//
// Thread-safety: all methods are thread-safe; the switches are atomics read on every IO.

#ifndef EMBER_SERVER_STORE_FAULT_INJECTION_FS_H_
#define EMBER_SERVER_STORE_FAULT_INJECTION_FS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "rocksdb/file_system.h"
#include "rocksdb/io_status.h"

namespace ember {

// Switches and counters shared with every wrapped file (defined in the .cc file).
class FaultState;

class FaultInjectionFileSystem : public rocksdb::FileSystemWrapper {
 public:
  // `target` does the real IO; typically rocksdb::FileSystem::Default().
  explicit FaultInjectionFileSystem(const std::shared_ptr<rocksdb::FileSystem>& target);

  const char* Name() const override { return "EmberFaultInjectionFileSystem"; }

  // Turns write / read failure on or off; takes effect for the next IO call.
  void SetWriteFailure(bool fail);
  void SetReadFailure(bool fail);
  // Whether injected errors carry RocksDB's retryable flag. Default: true.
  void SetRetryableErrors(bool retryable);
  // Fails each write / read IO call (the calls listed above) with probability `rate`,
  // in [0, 1], also while the switch is off; 0 (the default) turns it off. The draws
  // hash a call counter with `seed` (default 0): no RNG state, no lock.
  void SetWriteFailureRate(double rate);
  void SetReadFailureRate(double rate);
  void SetFailureSeed(uint64_t seed);

  // Number of IO calls failed so far by each mode.
  int64_t injected_write_failures() const;
  int64_t injected_read_failures() const;

  rocksdb::IOStatus NewSequentialFile(const std::string& fname,
                                      const rocksdb::FileOptions& file_opts,
                                      std::unique_ptr<rocksdb::FSSequentialFile>* result,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomAccessFile(const std::string& fname,
                                        const rocksdb::FileOptions& file_opts,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
                                        rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& file_opts,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& fname,
                                       const rocksdb::FileOptions& file_opts,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& fname, const std::string& old_fname,
                                      const rocksdb::FileOptions& file_opts,
                                      std::unique_ptr<rocksdb::FSWritableFile>* result,
                                      rocksdb::IODebugContext* dbg) override;

 private:
  // Shared with every file this file system wrapped; files may outlive it.
  const std::shared_ptr<FaultState> state_;
};

}  // namespace ember

#endif  // EMBER_SERVER_STORE_FAULT_INJECTION_FS_H_
