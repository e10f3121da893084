// Implementation of data/reader_pool.h.
#include "data/reader_pool.h"

#include "data/loader.h"

namespace zoo::data {

BatchReaderPool::BatchReaderPool(int64_t num_workers) {
  try {
    threads_.reserve(static_cast<size_t>(num_workers));
    for (int64_t i = 0; i < num_workers; ++i) threads_.emplace_back([this] { work(); });
  } catch (const std::exception& e) {
    // The destructor does not run for a half-built pool: stop the threads
    // that did start, or destroying the mutex under them would hang.
    const size_t started = threads_.size();
    stop();
    throw LoaderOptionError("num_workers", "cannot start " + std::to_string(num_workers) + " reader threads (" +
                                               std::to_string(started) + " started, then: " + e.what() +
                                               "); lower num_workers, or raise the process's thread or memory limits");
  }
}

BatchReaderPool::~BatchReaderPool() { stop(); }

void BatchReaderPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    jobs_.clear();
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

void BatchReaderPool::work() {
  for (;;) {
    std::packaged_task<models::Features()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

void BatchReaderPool::submit(std::function<models::Features()> job) {
  std::packaged_task<models::Features()> task(std::move(job));
  results_.push_back(task.get_future());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(std::move(task));
  }
  wake_.notify_one();
}

models::Features BatchReaderPool::take() {
  std::future<models::Features> front = std::move(results_.front());
  results_.pop_front();
  return front.get();
}

void BatchReaderPool::clear() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.clear();  // their futures report broken_promise; we never read them
  }
  for (auto& r : results_) r.wait();  // running jobs finish; dropped ones are ready (broken_promise)
  results_.clear();
}

}  // namespace zoo::data
