// The background prefetch worker of dense streaming (residency.md §6–§7): one thread
// materialising host copies ahead of execution from a FIFO, bounded queue. Duplicate keys
// coalesce; a full queue either refuses (submit) or backpressures the submitter (submit_blocking)
// but never drops admitted work; cancel_all fences everything submitted so far by generation;
// a job's exception is kept and rethrown to the caller that waits for that key.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "residency/report.h"

namespace qsmcore::residency {

class PrefetchWorker {
 public:
  enum class Admission { Admitted, Coalesced, AtCapacity };

  /// `queue_capacity` ≥ 1 pending jobs (throws Error{InvalidInput} for 0: a direct-mode stream
  /// with host budget 0 has no worker at all).
  explicit PrefetchWorker(std::size_t queue_capacity);
  /// Cancels queued work, lets a running job finish (its result is discarded) and joins.
  ~PrefetchWorker();
  PrefetchWorker(const PrefetchWorker&) = delete;
  PrefetchWorker& operator=(const PrefetchWorker&) = delete;

  /// Queues `job` under `key` unless that key is already queued, running, or completed and not
  /// yet consumed by wait (Coalesced), or the queue is full (AtCapacity: nothing is queued).
  Admission submit(const std::string& key, std::function<void()> job);
  /// As submit, but waits for a free slot instead of returning AtCapacity (counted as
  /// backpressure). Returns AtCapacity only when the worker is shutting down.
  Admission submit_blocking(const std::string& key, std::function<void()> job);

  /// Demand for `key`: blocks until its job has finished, consumes the result and rethrows the
  /// job's exception here. Returns false when no job for `key` is known (never submitted,
  /// already consumed, or cancelled): the caller must materialise the unit itself.
  bool wait(const std::string& key);
  /// Whether `key` is queued, running or completed-not-consumed.
  bool contains(const std::string& key) const;
  /// Forgets a completed, unconsumed result (e.g. its copy was evicted before use); a queued or
  /// running job is left alone. Returns whether a result was dropped.
  bool discard_completed(const std::string& key);

  /// Discards all queued work synchronously and fences running work: its completion will be
  /// discarded. Completed, unconsumed results are dropped too. Later submissions start afresh.
  void cancel_all();
  std::uint64_t generation() const;

  /// Counters maintained by the caller, which alone knows residency: a lookahead found the copy
  /// already resident (counts as coalesced), or a prefetched copy was evicted before use.
  void note_already_resident();
  void note_evicted_before_use();

  std::size_t queued() const;
  BackgroundPrefetchReport report() const;

 private:
  enum class State { Queued, Running, Done };
  struct Record {
    State state = State::Queued;
    std::uint64_t generation = 0;
    std::exception_ptr error;
  };
  struct Job {
    std::string key;
    std::function<void()> fn;
  };
  void run();
  void enqueue_locked(const std::string& key, std::function<void()> job);
  void cancel_locked();

  mutable std::mutex m_;
  std::condition_variable work_cv_;  // worker: queue non-empty or stop
  std::condition_variable done_cv_;  // waiters and blocked submitters: a job left the queue or finished
  std::deque<Job> queue_;
  std::map<std::string, Record> records_;
  std::size_t capacity_;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  BackgroundPrefetchReport report_;
  std::thread thread_;  // last: started after every member above exists
};

const char* to_string(PrefetchWorker::Admission a);

}  // namespace qsmcore::residency
