// Implementation of runner/step_profiler.h on LibTorch's Kineto and legacy profilers.
#include "runner/step_profiler.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#if __has_include(<torch/csrc/autograd/profiler_legacy.h>)
#include <torch/csrc/autograd/profiler_legacy.h>
#define ZOO_LEGACY_PROFILER 1
#else
#define ZOO_LEGACY_PROFILER 0
#endif
#include <torch/cuda.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "runner/log.h"

namespace zoo {

namespace {

namespace prof = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

std::set<ActivityType> activities(bool cuda) {
  std::set<ActivityType> a{ActivityType::CPU};
  if (cuda) a.insert(ActivityType::CUDA);
  return a;
}

}  // namespace

ProfileSteps parse_profile_steps(const std::string& spec) {
  const auto bad = [&] {
    return std::invalid_argument("'" + spec + "': expected FIRST:LAST[:PATH], steps counted from 1 (e.g. 10:12)");
  };
  const size_t colon = spec.find(':');
  if (colon == std::string::npos) throw bad();
  const size_t colon2 = spec.find(':', colon + 1);
  ProfileSteps out;
  try {
    size_t used = 0;
    out.first = std::stoll(spec.substr(0, colon), &used);
    if (used != colon) throw bad();
    const std::string l = spec.substr(colon + 1, colon2 == std::string::npos ? std::string::npos : colon2 - colon - 1);
    out.last = std::stoll(l, &used);
    if (used != l.size()) throw bad();
  } catch (const std::invalid_argument&) {
    throw bad();
  } catch (const std::out_of_range&) {
    throw bad();
  }
  if (out.first < 1 || out.last < out.first) throw bad();
  if (colon2 != std::string::npos) out.path = spec.substr(colon2 + 1);
  return out;
}

std::unique_ptr<StepProfiler> StepProfiler::from_spec(const std::string& spec, const std::string& model_dir, bool cuda,
                                                      int rank) {
  if (spec.empty()) return nullptr;
  const ProfileSteps steps = parse_profile_steps(spec);
  std::string path = steps.path;
  if (path.empty()) path = (std::filesystem::path(model_dir) / "profile.json").string();
  if (rank > 0) {  // each rank traces its own steps
    std::filesystem::path p(path);
    path = (p.parent_path() / (p.stem().string() + ".rank" + std::to_string(rank) + p.extension().string())).string();
  }
  return std::unique_ptr<StepProfiler>(new StepProfiler(steps.first, steps.last, path, cuda));
}

// Records while it lives; its destructor writes the Chrome trace to `text`.
struct StepProfiler::CpuTrace {
  std::ostringstream text;
#if ZOO_LEGACY_PROFILER
  std::unique_ptr<prof::RecordProfile> recording = std::make_unique<prof::RecordProfile>(text);
#else
  std::unique_ptr<int> recording;
#endif
};

StepProfiler::StepProfiler(int64_t first, int64_t last, std::string path, bool cuda)
    : first_(first), last_(last), path_(std::move(path)), cuda_(cuda), kineto_(cuda || !ZOO_LEGACY_PROFILER) {
  // Loads Kineto's tracer now, so that its start-up is not in the first traced step.
  if (kineto_) prof::prepareProfiler(ProfilerConfig(ProfilerState::KINETO), activities(cuda_));
}

StepProfiler::~StepProfiler() {
  if (active_ && kineto_) prof::disableProfiler();  // a run that ended inside the range writes nothing
}

void StepProfiler::before_step(int64_t i) {
  if (i != first_) return;
  if (kineto_) {
    if (cuda_) torch::cuda::synchronize();  // earlier steps' kernels stay out of the trace
    prof::enableProfiler(ProfilerConfig(ProfilerState::KINETO), activities(cuda_));
  } else {
    cpu_ = std::make_unique<CpuTrace>();
  }
  active_ = true;
}

void StepProfiler::after_step(int64_t i) {
  if (!active_ || i != last_) return;
  std::unique_ptr<prof::ProfilerResult> result;
  if (kineto_) {
    if (cuda_) torch::cuda::synchronize();
    result = prof::disableProfiler();
  } else {
    cpu_->recording.reset();  // stops and writes the trace to cpu_->text
  }
  active_ = false;
  const std::string steps = "steps " + std::to_string(first_) + "-" + std::to_string(last_);
  try {  // a profile that cannot be written is not worth the run
    std::filesystem::create_directories(std::filesystem::path(path_).parent_path());
    if (result) {
      result->save(path_);
    } else {
      std::ofstream out(path_);
      out << cpu_->text.str();
      if (!out.flush()) throw std::runtime_error("cannot write " + path_);
      cpu_.reset();
    }
    log::info("profile_steps: trace of " + steps + " in " + path_);
  } catch (const c10::Error& e) {
    log::warn("profile_steps: no trace of " + steps + " (" + e.what_without_backtrace() + ")");
  } catch (const std::exception& e) {
    log::warn("profile_steps: no trace of " + steps + " (" + e.what() + ")");
  }
}

}  // namespace zoo
