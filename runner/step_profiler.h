// A PyTorch-profiler trace of chosen training steps, for speed work: Kineto
// on CUDA (ops and kernels), the legacy profiler on CPU (ops; it needs no
// Kineto, which Debian's LibTorch lacks).
// ZOO_PROFILE=FIRST:LAST[:PATH] traces this run's steps FIRST..LAST (counted
// from 1) into a Chrome trace at PATH (default: profile.json in the
// model_dir; data-parallel rank R > 0 writes PATH with ".rankR" before its
// extension), which Perfetto, chrome://tracing and TensorBoard open. Defines:
// StepProfiler.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace zoo {

class StepProfiler {
 public:
  // Null when ZOO_PROFILE is unset; throws naming the variable when it is malformed.
  static std::unique_ptr<StepProfiler> from_environment(const std::string& model_dir, bool cuda, int rank = 0);
  ~StepProfiler();
  // Call around step i of the run (1-based).
  void before_step(int64_t i);
  void after_step(int64_t i);
  const std::string& path() const { return path_; }

 private:
  StepProfiler(int64_t first, int64_t last, std::string path, bool cuda);
  int64_t first_, last_;
  std::string path_;
  bool cuda_;
  bool kineto_;  // else the legacy profiler (CPU)
  bool active_ = false;
  struct CpuTrace;  // the legacy profiler's recording, while active on CPU
  std::unique_ptr<CpuTrace> cpu_;
};

}  // namespace zoo
