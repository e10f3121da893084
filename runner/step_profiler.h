// A PyTorch-profiler trace of chosen training steps, for speed work: Kineto
// on CUDA (ops and kernels), the legacy profiler on CPU (ops; it needs no
// Kineto, which Debian's LibTorch lacks).
// runconfig.profile_steps (or ZOO_PROFILE) FIRST:LAST[:PATH] traces this run's
// steps FIRST..LAST (counted from 1) into a Chrome trace at PATH (default: profile.json in the
// model_dir; data-parallel rank R > 0 writes PATH with ".rankR" before its
// extension), which Perfetto, chrome://tracing and TensorBoard open. Defines:
// ProfileSteps, parse_profile_steps, StepProfiler.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace zoo {

struct ProfileSteps {
  int64_t first = 0, last = 0;
  std::string path;  // "" when the spec names none
};
// FIRST:LAST[:PATH]; throws std::invalid_argument saying what is expected.
ProfileSteps parse_profile_steps(const std::string& spec);

class StepProfiler {
 public:
  // Null when spec is empty (runconfig.profile_steps unset).
  static std::unique_ptr<StepProfiler> from_spec(const std::string& spec, const std::string& model_dir, bool cuda,
                                                 int rank = 0);
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
