// Implementation of runner/parallel/distributed.h on c10d's stores and process groups.
#include "runner/parallel/distributed.h"

// Gloo needs its own headers (Debian: libgloo-dev; PyTorch's wheels lack
// them); NCCL comes with CUDA builds of LibTorch (ZOO_HAVE_NCCL, set by CMake).
#if ZOO_HAVE_GLOO || ZOO_HAVE_NCCL
#define ZOO_HAVE_C10D 1
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif
#if ZOO_HAVE_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
#if ZOO_HAVE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

#include "data/loader.h"
#include "runner/log.h"
#include "runner/parallel/grad_hooks.h"

namespace zoo {

namespace {

std::pair<std::string, uint16_t> host_and_port(const std::string& text, const std::string& what) {
  const size_t colon = text.rfind(':');
  char* end = nullptr;
  const long port = colon == std::string::npos ? -1 : std::strtol(text.c_str() + colon + 1, &end, 10);
  if (colon == std::string::npos || colon == 0 || *end != '\0' || port <= 0 || port > 65535)
    throw std::runtime_error(what + " '" + text + "': expected HOST:PORT");
  return {text.substr(0, colon), static_cast<uint16_t>(port)};
}

// LOCAL_RANK as torchrun, srun, Open MPI or MPICH set it (0 when unset).
int local_rank_from_environment() {
  for (const char* n : {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"})
    if (const char* v = std::getenv(n); v && *v) return std::atoi(v);
  return 0;
}

// The indices of `tensors`, taken in `order` within each dtype and device,
// packed into buckets of one dtype and device and about bucket_bytes.
std::vector<std::vector<size_t>> make_buckets(const std::vector<torch::Tensor>& tensors,
                                              const std::vector<size_t>& order, int64_t bucket_bytes) {
  std::map<std::pair<int, std::string>, std::vector<size_t>> groups;
  for (size_t i : order) groups[{static_cast<int>(tensors[i].scalar_type()), tensors[i].device().str()}].push_back(i);
  std::vector<std::vector<size_t>> buckets;
  for (const auto& [key, group] : groups) {
    int64_t bytes = 0;
    for (size_t k = 0; k < group.size(); ++k) {
      const int64_t n = static_cast<int64_t>(tensors[group[k]].nbytes());
      if (k == 0 || bytes + n > bucket_bytes) buckets.emplace_back(), bytes = 0;
      buckets.back().push_back(group[k]);
      bytes += n;
    }
  }
  return buckets;
}

std::vector<size_t> indices(size_t n) {
  std::vector<size_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = i;
  return out;
}

// tensors[i], i in `which`.
std::vector<torch::Tensor> pick(const std::vector<torch::Tensor>& tensors, const std::vector<size_t>& which) {
  std::vector<torch::Tensor> out;
  for (size_t i : which) out.push_back(tensors[i]);
  return out;
}

// The gradients of parameters[i], i in `which`; a parameter this rank's pass
// did not reach gets a zero gradient here, not none (every rank sends the same sizes).
std::vector<torch::Tensor> gradients_of(const std::vector<torch::Tensor>& parameters,
                                        const std::vector<size_t>& which) {
  std::vector<torch::Tensor> out;
  for (size_t i : which) {
    const torch::Tensor& p = parameters[i];
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    out.push_back(p.grad());
  }
  return out;
}

// Tensors as one flat buffer, and the buffer's values copied back into them.
torch::Tensor flatten(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> parts;
  for (const auto& t : tensors) parts.push_back(t.reshape({-1}));
  return torch::cat(parts);
}
void copy_back(const torch::Tensor& flat, const std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (torch::Tensor t : tensors) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

// Each tensor's values, flattened into buckets (make_buckets, in order);
// `op` runs on each buffer and the results are copied back.
void for_each_bucket(const std::vector<torch::Tensor>& tensors, int64_t bucket_bytes,
                     const std::function<void(torch::Tensor&)>& op) {
  for (const auto& bucket : make_buckets(tensors, indices(tensors.size()), bucket_bytes)) {
    const std::vector<torch::Tensor> part = pick(tensors, bucket);
    torch::Tensor flat = flatten(part);
    op(flat);
    copy_back(flat, part);
  }
}

}  // namespace

#if ZOO_HAVE_C10D
struct Distributed::Group {
  c10::intrusive_ptr<c10d::Store> store;
#if ZOO_HAVE_GLOO
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
#endif
#if ZOO_HAVE_NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
#endif
  template <class F>
  void with_backend(F&& f) {  // join() made exactly one of them
#if ZOO_HAVE_NCCL
    if (nccl) return f(*nccl);
#endif
#if ZOO_HAVE_GLOO
    f(*gloo);
#endif
  }
  void allreduce(std::vector<at::Tensor>& buffers) {
    with_backend([&](auto& g) { g.allreduce(buffers)->wait(); });
  }
  // Starts an all-reduce; the returned function waits for it.
  std::function<void()> start_allreduce(std::vector<at::Tensor>& buffers) {
    std::function<void()> wait;
    with_backend([&](auto& g) {
      auto work = g.allreduce(buffers);
      wait = [work] { work->wait(); };
    });
    return wait;
  }
  // `chunks` (one per rank, views of one buffer) get every rank's `shard`.
  std::function<void()> start_allgather(std::vector<at::Tensor> chunks, at::Tensor shard) {
    std::function<void()> wait;
    with_backend([&](auto& g) {
      std::vector<std::vector<at::Tensor>> outputs{std::move(chunks)};
      std::vector<at::Tensor> inputs{std::move(shard)};
      auto work = g.allgather(outputs, inputs);
      wait = [work, outputs, inputs] { work->wait(); };  // the vectors live as long as the work
    });
    return wait;
  }
  // `out` gets the sum over the ranks of this rank's chunk of `full`.
  // Gloo has no reduce-scatter: it all-reduces `full` in place and keeps the chunk.
  std::function<void()> start_reduce_scatter(at::Tensor full, at::Tensor out, int rank, int world_size) {
#if ZOO_HAVE_NCCL
    if (nccl) {
      std::vector<std::vector<at::Tensor>> inputs{full.chunk(world_size)};
      std::vector<at::Tensor> outputs{out};
      auto work = nccl->reduce_scatter(outputs, inputs);
      return [work, inputs, outputs] { work->wait(); };
    }
#endif
    std::vector<at::Tensor> whole{full};
    auto wait = start_allreduce(whole);
    return [wait, whole, out, rank]() mutable {
      wait();
      out.copy_(whole[0].narrow(0, int64_t{rank} * out.numel(), out.numel()));
    };
  }
  void broadcast(std::vector<at::Tensor>& buffers, int root) {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    with_backend([&](auto& g) { g.broadcast(buffers, options)->wait(); });
  }
};
#else
struct Distributed::Group {  // never made: join() refuses first
  void allreduce(std::vector<at::Tensor>&) {}
  std::function<void()> start_allgather(std::vector<at::Tensor>, at::Tensor) {
    return [] {};
  }
  std::function<void()> start_reduce_scatter(at::Tensor, at::Tensor, int, int) {
    return [] {};
  }
  std::function<void()> start_allreduce(std::vector<at::Tensor>&) {
    return [] {};
  }
  void broadcast(std::vector<at::Tensor>&, int) {}
};
#endif

// The state of overlap_with_backward. The hooks may run on autograd's
// device threads, hence the mutex.
struct Distributed::Overlap {
  std::vector<torch::Tensor> parameters;
  // A leaf holds its accumulator weakly: without these, hooks could vanish with it.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  std::vector<std::vector<size_t>> buckets;  // parameter indices; the backward pass reaches the last parameters first
  std::vector<size_t> bucket_of;
  std::mutex mutex;
  bool armed = false, repeated = false;
  std::vector<char> seen;                   // per parameter: its gradient is accumulated
  std::vector<size_t> waiting;              // per bucket: gradients still to come
  size_t next_bucket = 0;                   // buckets start in order
  std::vector<torch::Tensor> flat;          // per started bucket
  std::vector<std::function<void()>> wait;  // per started bucket

  void reset() {
    seen.assign(parameters.size(), 0);
    waiting.clear();
    for (const auto& b : buckets) waiting.push_back(b.size());
    next_bucket = 0;
    flat.assign(buckets.size(), torch::Tensor());
    wait.assign(buckets.size(), nullptr);
    repeated = false;
  }
};

void Distributed::overlap_with_backward(const std::vector<torch::Tensor>& parameters) {
  if (world_size_ == 1) return;
  overlap_ = std::make_shared<Overlap>();
  Overlap& o = *overlap_;
  o.parameters = parameters;
  std::vector<size_t> reversed = indices(parameters.size());
  std::reverse(reversed.begin(), reversed.end());
  o.buckets = make_buckets(parameters, reversed, bucket_bytes_);
  o.bucket_of.assign(parameters.size(), 0);
  for (size_t b = 0; b < o.buckets.size(); ++b)
    for (size_t k : o.buckets[b]) o.bucket_of[k] = b;
  for (size_t k = 0; k < parameters.size(); ++k) {
    if (!parameters[k].requires_grad()) continue;  // it never gets a gradient: averaged as zeros at the end
    o.accumulators.push_back(after_accumulation(parameters[k], [this, k, weak = std::weak_ptr<Overlap>(overlap_)] {
      const std::shared_ptr<Overlap> held = weak.lock();
      if (!held) return;
      Overlap& o = *held;
      std::lock_guard<std::mutex> lock(o.mutex);
      if (!o.armed) return;
      if (o.seen[k]) {  // a second accumulation in one pass: its bucket may have left already
        o.repeated = true;
        return;
      }
      o.seen[k] = 1;
      --o.waiting[o.bucket_of[k]];
      start_ready_buckets(o);
    }));
  }
  o.reset();
}

void Distributed::arm() {
  if (!overlap_) return;
  std::lock_guard<std::mutex> lock(overlap_->mutex);
  for (auto& w : overlap_->wait)  // a step that failed part-way: finish its collectives, in order
    if (w) w();
  overlap_->reset();
  overlap_->armed = true;
}

void Distributed::start_ready_buckets(Overlap& o) {
  while (o.next_bucket < o.buckets.size() && o.waiting[o.next_bucket] == 0 && !o.repeated) {
    const size_t b = o.next_bucket++;
    o.flat[b] = flatten(gradients_of(o.parameters, o.buckets[b]));
    std::vector<at::Tensor> buffers{o.flat[b]};
    o.wait[b] = group_->start_allreduce(buffers);
  }
}

Distributed::~Distributed() {
  stopping_ = true;
  if (heartbeat_.joinable()) heartbeat_.join();
}

std::string Distributed::ranks_gone() {
#if ZOO_HAVE_C10D
  auto beats = [&] {
    std::vector<int64_t> out(static_cast<size_t>(world_size_), -1);
    for (int r = 0; r < world_size_; ++r) {
      const std::string key = "zoo_heartbeat_" + std::to_string(r);
      if (!group_->store->check({key})) continue;
      const std::vector<uint8_t> v = group_->store->get(key);
      out[static_cast<size_t>(r)] = std::stoll(std::string(v.begin(), v.end()));
    }
    return out;
  };
  try {
    const auto before = beats();
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    const auto after = beats();
    std::string gone;
    for (int r = 0; r < world_size_; ++r)
      if (r != rank_ && before[static_cast<size_t>(r)] == after[static_cast<size_t>(r)])
        gone += (gone.empty() ? "rank " : ", rank ") + std::to_string(r);
    return gone;
  } catch (const std::exception&) {
    return "rank 0 (it holds the store where the ranks meet)";
  }
#else
  return "";
#endif
}

torch::Device Distributed::device_of(const torch::Device& requested) {
  if (!requested.is_cuda()) return requested;
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank_from_environment()));
}

std::unique_ptr<Distributed> Distributed::join(const RunConfig& rc, const torch::Device& device) {
  std::unique_ptr<Distributed> d(new Distributed());
  const data::TaskShard shard = data::TaskShard::from_environment();
  d->rank_ = static_cast<int>(shard.rank);
  d->world_size_ = static_cast<int>(shard.num_tasks);
  d->local_rank_ = local_rank_from_environment();
  if (rc.main_process_id >= d->world_size_)
    throw std::runtime_error("runconfig.main_process_id " + std::to_string(rc.main_process_id) +
                             " is not a rank of this job (WORLD_SIZE " + std::to_string(d->world_size_) + ")");
  d->main_rank_ = static_cast<int>(rc.main_process_id);
  d->bucket_bytes_ = static_cast<int64_t>(rc.allreduce_bucket_mb * (1 << 20));
#if !ZOO_HAVE_C10D
  (void)device;
  throw std::runtime_error(
      "runconfig.enable_distributed: this zoo was built without the headers of c10d's Gloo "
      "process group (Debian: libgloo-dev) and without NCCL; install them and rebuild");
#else
  const auto timeout = std::chrono::milliseconds(rc.dist_timeout * 1000);
  const std::string backend = rc.dist_backend.value_or(device.is_cuda() ? "nccl" : "gloo");
  d->group_ = std::make_unique<Group>();

#if !ZOO_HAVE_GLOO
  if (backend == "gloo")
    throw std::runtime_error(
        "runconfig.dist_backend gloo: this zoo was built without the headers of c10d's Gloo "
        "process group (Debian: libgloo-dev); use nccl on GPUs, or install them and rebuild");
#endif
#if !ZOO_HAVE_NCCL
  if (backend != "gloo")
    throw std::runtime_error("runconfig.dist_backend nccl: this LibTorch was built without NCCL; use gloo");
#endif
  const bool file_store = rc.init_method.rfind("file://", 0) == 0;
  std::pair<std::string, uint16_t> at;  // the TCP store's host and port
  if (!file_store && rc.init_method.rfind("tcp://", 0) == 0) {
    at = host_and_port(rc.init_method.substr(6), "runconfig.init_method");
  } else if (!file_store) {  // env://
    at = host_and_port(rc.dist_addr, "runconfig.dist_addr");
    if (const char* a = std::getenv("MASTER_ADDR"); a && *a) at.first = a;
    if (const char* p = std::getenv("MASTER_PORT"); p && *p) at = host_and_port(at.first + ":" + p, "MASTER_PORT");
  }
  const std::string meeting = file_store ? rc.init_method.substr(7) : at.first + ":" + std::to_string(at.second);
  const auto started = std::chrono::steady_clock::now();
  try {
    if (file_store) {
      d->group_->store = c10::make_intrusive<c10d::FileStore>(meeting, d->world_size_);
    } else {
      c10d::TCPStoreOptions options;
      options.port = at.second;
      options.isServer = d->rank_ == 0;
      options.numWorkers = static_cast<size_t>(d->world_size_);
      options.waitWorkers = true;
      options.timeout = timeout;
      d->group_->store = c10::make_intrusive<c10d::TCPStore>(at.first, options);
    }
    if (backend == "gloo") {
#if ZOO_HAVE_GLOO
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
      options->devices.push_back(interface && *interface ? c10d::ProcessGroupGloo::createDeviceForInterface(interface)
                                                         : c10d::ProcessGroupGloo::createDefaultDevice());
      d->group_->gloo =
          c10::make_intrusive<c10d::ProcessGroupGloo>(d->group_->store, d->rank_, d->world_size_, options);
#endif
    } else {
#if ZOO_HAVE_NCCL
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = timeout;
      d->group_->nccl =
          c10::make_intrusive<c10d::ProcessGroupNCCL>(d->group_->store, d->rank_, d->world_size_, options);
#endif
    }
  } catch (const std::exception& e) {
    // c10::Error, or (LibTorch 1.13) c10d's TimeoutError, a std::runtime_error: "The client socket has timed out".
    // The store's wait and the process group's each take up to dist_timeout: say how long it really was.
    std::string reason = e.what();
    if (auto nl = reason.find("\nException raised from"); nl != std::string::npos) reason.resize(nl);
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started);
    const std::string who = d->rank_ == 0 ? "the other ranks did not all arrive"
                                          : "rank 0, which holds the store where the ranks meet, did not answer (if it "
                                            "ended, its own log says why)";
    throw std::runtime_error(
        strf("rank %d of %d: could not meet the other ranks at %s after %ld s: %s "
             "(runconfig.dist_timeout %ld s for each step of meeting) (%s)",
             d->rank_, d->world_size_, meeting.c_str(), static_cast<long>(waited.count()), who.c_str(),
             static_cast<long>(rc.dist_timeout), reason.c_str()));
  }
  // Bumped every second, so that when a collective fails the survivors can
  // name the rank that stopped.
  Distributed* self = d.get();
  self->heartbeat_ = std::thread([self] {
    const std::string key = "zoo_heartbeat_" + std::to_string(self->rank_);
    for (int64_t beat = 0; !self->stopping_; ++beat) {
      try {
        const std::string text = std::to_string(beat);
        self->group_->store->set(key, std::vector<uint8_t>(text.begin(), text.end()));
      } catch (const std::exception&) {
        return;  // the store is gone with rank 0; the next collective says so
      }
      for (int i = 0; i < 10 && !self->stopping_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  log::info(strf("Data-parallel rank %d of %d (local rank %d), %s, met at %s", d->rank_, d->world_size_, d->local_rank_,
                 backend.c_str(), meeting.c_str()));
  return d;
#endif
}

void Distributed::run(const char* what, const std::function<void()>& collective) {
  try {
    collective();
  } catch (const std::exception& e) {
    std::string reason = e.what();
    if (auto nl = reason.find("\nException raised from"); nl != std::string::npos) reason.resize(nl);
    const std::string gone = ranks_gone();
    throw std::runtime_error(strf("rank %d of %d: %s failed: %s (%s)", rank_, world_size_, what,
                                  gone.empty() ? "another rank has ended or stopped answering"
                                               : (gone + " stopped answering (ended, killed or paused; if it "
                                                         "ended, its own log says why)")
                                                     .c_str(),
                                  reason.c_str()));
  }
}

void Distributed::broadcast(const std::vector<torch::Tensor>& tensors, int root) {
  if (world_size_ == 1) return;
  for_each_bucket(tensors, bucket_bytes_, [&](torch::Tensor& flat) {
    run("broadcasting the parameters", [&] {
      std::vector<at::Tensor> buffers{flat};
      group_->broadcast(buffers, root);
    });
  });
}

void Distributed::broadcast_bytes(std::vector<char>& bytes, int root) {
  if (world_size_ == 1) return;
  torch::Tensor size = torch::full({1}, static_cast<int64_t>(bytes.size()), torch::kLong);
  run("sharing the optimizer state", [&] {
    std::vector<at::Tensor> buffers{size};
    group_->broadcast(buffers, root);
  });
  torch::Tensor data = torch::empty({size.item<int64_t>()}, torch::kUInt8);
  if (rank_ == root) std::memcpy(data.data_ptr(), bytes.data(), bytes.size());
  run("sharing the optimizer state", [&] {
    std::vector<at::Tensor> buffers{data};
    group_->broadcast(buffers, root);
  });
  if (rank_ != root)
    bytes.assign(static_cast<char*>(data.data_ptr()), static_cast<char*>(data.data_ptr()) + data.numel());
}

void Distributed::average_gradients(const std::vector<torch::Tensor>& parameters) {
  if (world_size_ == 1) return;
  if (overlap_ && overlap_->armed) {
    Overlap& o = *overlap_;
    std::unique_lock<std::mutex> lock(o.mutex);
    o.armed = false;
    const size_t started_early = o.next_bucket;
    for (size_t k = 0; k < o.parameters.size(); ++k)  // the parameters this pass did not reach
      if (!o.seen[k]) o.seen[k] = 1, --o.waiting[o.bucket_of[k]];
    start_ready_buckets(o);
    for (size_t b = 0; b < o.buckets.size(); ++b)
      if (o.wait[b]) run("averaging the gradients", o.wait[b]), o.wait[b] = nullptr;
    last_overlap_ = {static_cast<int64_t>(o.buckets.size()), static_cast<int64_t>(started_early)};
    if (!o.repeated) {
      for (size_t b = 0; b < o.buckets.size(); ++b) {
        copy_back(o.flat[b].div_(world_size_), gradients_of(o.parameters, o.buckets[b]));
        o.flat[b] = torch::Tensor();
      }
      return;
    }
    // A gradient accumulated twice in one pass (the same on every rank):
    // what left early is stale, so average the gradients as they are now.
  }
  for_each_bucket(gradients_of(parameters, indices(parameters.size())), bucket_bytes_, [&](torch::Tensor& flat) {
    run("averaging the gradients", [&] {
      std::vector<at::Tensor> buffers{flat};
      group_->allreduce(buffers);
    });
    flat.div_(world_size_);
  });
}

void Distributed::sum(torch::Tensor& t) {
  if (world_size_ == 1) return;
  run("summing the metrics", [&] {
    std::vector<at::Tensor> buffers{t};
    group_->allreduce(buffers);
  });
}

}  // namespace zoo

namespace zoo {

std::function<void()> Distributed::start_all_gather(const torch::Tensor& full, const torch::Tensor& shard) {
  const std::vector<torch::Tensor> chunks = full.chunk(world_size_);
  std::function<void()> wait;
  run("gathering the parameters", [&] { wait = group_->start_allgather(chunks, shard); });
  return [this, wait] { run("gathering the parameters", wait); };
}

std::function<void()> Distributed::start_reduce_scatter(const torch::Tensor& full, const torch::Tensor& out) {
  std::function<void()> wait;
  run("reducing the gradients", [&] { wait = group_->start_reduce_scatter(full, out, rank_, world_size_); });
  return [this, wait] { run("reducing the gradients", wait); };
}

bool Distributed::all_agree(bool value) {
  torch::Tensor votes = torch::full({1}, value ? 0.0 : 1.0, torch::kDouble);
  sum(votes);
  return votes.item<double>() == 0;
}

}  // namespace zoo
