#include "residency/prefetch_worker.h"

#include <algorithm>
#include <chrono>

#include "qsmcore/error.h"

namespace qsmcore::residency {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
}  // namespace

const char* to_string(PrefetchWorker::Admission a) {
  switch (a) {
    case PrefetchWorker::Admission::Admitted:
      return "admitted";
    case PrefetchWorker::Admission::Coalesced:
      return "coalesced";
    case PrefetchWorker::Admission::AtCapacity:
      return "at_capacity";
  }
  return "?";
}

PrefetchWorker::PrefetchWorker(std::size_t queue_capacity) : capacity_(queue_capacity) {
  if (queue_capacity == 0)
    throw Error(ErrorKind::InvalidInput, "prefetch worker queue capacity must be at least 1 (ZeroQueueCapacity)");
  report_.queue_capacity = queue_capacity;
  thread_ = std::thread([this] { run(); });
}

PrefetchWorker::~PrefetchWorker() {
  {
    std::lock_guard lock(m_);
    cancel_locked();
    stop_ = true;
  }
  work_cv_.notify_all();
  done_cv_.notify_all();
  thread_.join();
}

void PrefetchWorker::enqueue_locked(const std::string& key, std::function<void()> job) {
  queue_.push_back(Job{key, std::move(job)});
  records_[key] = Record{State::Queued, generation_, nullptr};
  ++report_.submitted;
  report_.peak_queue_occupancy = std::max<std::uint64_t>(report_.peak_queue_occupancy, queue_.size());
  work_cv_.notify_one();
}

PrefetchWorker::Admission PrefetchWorker::submit(const std::string& key, std::function<void()> job) {
  std::lock_guard lock(m_);
  if (records_.count(key)) {
    ++report_.coalesced;
    return Admission::Coalesced;
  }
  if (stop_ || queue_.size() >= capacity_) return Admission::AtCapacity;
  enqueue_locked(key, std::move(job));
  return Admission::Admitted;
}

PrefetchWorker::Admission PrefetchWorker::submit_blocking(const std::string& key, std::function<void()> job) {
  std::unique_lock lock(m_);
  if (!records_.count(key) && queue_.size() >= capacity_ && !stop_) {
    ++report_.backpressure_count;
    const auto t0 = Clock::now();
    // Another thread may submit the same key meanwhile: then this one coalesces.
    done_cv_.wait(lock, [&] { return stop_ || queue_.size() < capacity_ || records_.count(key); });
    report_.backpressure_seconds += seconds_since(t0);
  }
  if (records_.count(key)) {
    ++report_.coalesced;
    return Admission::Coalesced;
  }
  if (stop_) return Admission::AtCapacity;
  enqueue_locked(key, std::move(job));
  return Admission::Admitted;
}

void PrefetchWorker::run() {
  std::unique_lock lock(m_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left (shutdown cancels the queue first)
    Job job = std::move(queue_.front());
    queue_.pop_front();
    const std::uint64_t gen = generation_;
    records_[job.key].state = State::Running;
    ++report_.started;
    done_cv_.notify_all();  // a slot is free for blocked submitters
    lock.unlock();

    std::exception_ptr error;
    try {
      job.fn();
    } catch (...) {
      error = std::current_exception();
    }
    job.fn = nullptr;  // release captured state outside the lock

    lock.lock();
    auto it = records_.find(job.key);
    // A cancel_all since the start erased this record (a new one of a later generation may
    // exist under the same key): the completion is stale and discarded.
    if (it == records_.end() || it->second.generation != gen || it->second.state != State::Running) {
      ++report_.cancelled;
    } else {
      it->second.state = State::Done;
      it->second.error = error;
      ++(error ? report_.failed : report_.completed);
    }
    done_cv_.notify_all();
  }
}

bool PrefetchWorker::wait(const std::string& key) {
  std::unique_lock lock(m_);
  auto it = records_.find(key);
  if (it == records_.end()) return false;
  if (it->second.state == State::Done) {
    ++report_.ready_before_demand;
  } else {
    ++report_.in_flight_at_demand;
    ++report_.demand_waits;
    const auto t0 = Clock::now();
    done_cv_.wait(lock, [&] {
      it = records_.find(key);
      return it == records_.end() || it->second.state == State::Done;
    });
    report_.demand_wait_seconds += seconds_since(t0);
    if (it == records_.end()) return false;  // cancelled while waiting
  }
  const std::exception_ptr error = it->second.error;
  records_.erase(it);
  lock.unlock();
  if (error) std::rethrow_exception(error);
  return true;
}

bool PrefetchWorker::contains(const std::string& key) const {
  std::lock_guard lock(m_);
  return records_.count(key) != 0;
}

bool PrefetchWorker::discard_completed(const std::string& key) {
  std::lock_guard lock(m_);
  auto it = records_.find(key);
  if (it == records_.end() || it->second.state != State::Done) return false;
  records_.erase(it);
  return true;
}

void PrefetchWorker::cancel_locked() {
  ++generation_;
  report_.cancelled += queue_.size();
  queue_.clear();
  // Running records go too: the worker sees the missing record and discards the completion.
  records_.clear();
}

void PrefetchWorker::cancel_all() {
  std::deque<Job> dropped;  // destroyed outside the lock: a job's captures may be heavy
  {
    std::lock_guard lock(m_);
    dropped.swap(queue_);
    report_.cancelled += dropped.size();
    ++generation_;
    records_.clear();
  }
  done_cv_.notify_all();
}

std::uint64_t PrefetchWorker::generation() const {
  std::lock_guard lock(m_);
  return generation_;
}

void PrefetchWorker::note_already_resident() {
  std::lock_guard lock(m_);
  ++report_.coalesced;
}

void PrefetchWorker::note_evicted_before_use() {
  std::lock_guard lock(m_);
  ++report_.evicted_before_use;
}

std::size_t PrefetchWorker::queued() const {
  std::lock_guard lock(m_);
  return queue_.size();
}

BackgroundPrefetchReport PrefetchWorker::report() const {
  std::lock_guard lock(m_);
  return report_;
}

}  // namespace qsmcore::residency
