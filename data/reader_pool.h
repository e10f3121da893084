// Background batch reading for StreamLoader: worker threads run read jobs
// submitted in order and hand the results back in the same order.
// Defines: BatchReaderPool.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "models/model.h"

namespace zoo::data {

class BatchReaderPool {
 public:
  // Throws LoaderOptionError (num_workers) when a thread cannot be started.
  explicit BatchReaderPool(int64_t num_workers);
  ~BatchReaderPool();  // finishes running jobs, drops queued ones, joins
  void submit(std::function<models::Features()> job);
  // The oldest submitted job's batch; rethrows its exception.
  models::Features take();
  size_t in_flight() const { return results_.size(); }
  // Drops every job not yet taken (waiting for those already running).
  void clear();

 private:
  void work();
  void stop();  // drops queued jobs, joins every thread
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<models::Features()>> jobs_;
  std::deque<std::future<models::Features>> results_;
  bool stopping_ = false;
};

}  // namespace zoo::data
