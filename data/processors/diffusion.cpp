// Implementation of data/processors/diffusion.h.
#include "data/processors/diffusion.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "data/npy.h"
#include "data/splitmix.h"

namespace zoo::data {

namespace fs = std::filesystem;

namespace {

template <class T>
config::Schema<T>& add_diffusion_fields(config::Schema<T>& s) {
  using O = DiffusionOptions;
  return add_loader_fields(s)
      .field("split", static_cast<std::string T::*>(&O::split), "train or val: the subdirectory of data_dir.",
             config::one_of({"train", "val"}))
      .field("num_classes", static_cast<int64_t T::*>(&O::num_classes),
             "Classes (the model's); a dropped label becomes num_classes.", config::positive<int64_t>())
      .field("num_diffusion_steps", static_cast<int64_t T::*>(&O::num_diffusion_steps),
             "Timesteps are drawn from [0, num_diffusion_steps) (the model's).", config::positive<int64_t>())
      .field("label_dropout_rate", static_cast<double T::*>(&O::label_dropout_rate),
             "Share of labels replaced by the unconditional label (the model's).",
             config::in_range(0.0, 1.0, /*hi_open=*/true))
      .field("latent_size", static_cast<std::vector<int64_t> T::*>(&O::latent_size),
             "[H, W] of a latent (the model's latent_size or vae.latent_size).")
      .field("latent_channels", static_cast<int64_t T::*>(&O::latent_channels),
             "Channels of a latent (the model's latent_channels or vae.latent_channels).", config::positive<int64_t>())
      .field("vae_scaling_factor", static_cast<double T::*>(&O::vae_scaling_factor),
             "Sampled latents are multiplied by it (the model's vae.scaling_factor).", config::positive<double>())
      .field("image_channels", static_cast<int64_t T::*>(&O::image_channels),
             "Channels of the images the latents were made from (accepted; the latents decide).",
             config::positive<int64_t>())
      .field("image_size", static_cast<std::optional<std::vector<int64_t>> T::*>(&O::image_size),
             "[H, W] of the images the latents were made from (accepted; the latents decide).")
      .field("schedule_name", static_cast<std::optional<std::string> T::*>(&O::schedule_name),
             "Accepted (the model's beta schedule decides).")
      .field("var_loss", static_cast<std::optional<bool> T::*>(&O::var_loss), "Accepted (the model's).")
      .field("noaugment", static_cast<bool T::*>(&O::noaugment), "Accepted: zoo transforms no latents.")
      .field("transforms", static_cast<std::vector<TransformSpec> T::*>(&O::transforms),
             "Must be empty: latents are read as they were written.")
      .hardware_only({"use_worker_cache"}, "Cerebras cluster data staging")
      .ignored({"mixed_precision", "fp16_type"}, "the model's precision keys decide it")
      .validate([](const T& o, const auto& fail) {
        if (o.latent_size.size() != 2 || o.latent_size[0] <= 0 || o.latent_size[1] <= 0)
          fail("latent_size",
               "required: [H, W] (taken from the model's latent_size or vae.latent_size when "
               "this section has none)");
        if (!o.transforms.empty()) fail("transforms", "zoo applies no transforms to latents (leave it empty)");
      });
}

// Standard normal values from a SplitMix64 stream (Box-Muller), the same on every platform.
void fill_normal(SplitMix64& rng, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = 1.0 - rng.uniform(), u2 = rng.uniform();  // u1 in (0, 1]
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 2.0 * M_PI * u2;
    out[i] = float(r * std::cos(a));
    if (i + 1 < n) out[i + 1] = float(r * std::sin(a));
  }
}

Features empty_batch(const DiffusionOptions& o, int64_t B) {
  const int64_t C = o.latent_channels, H = o.latent_size[0], W = o.latent_size[1];
  return {{"input", torch::empty({B, C, H, W})},
          {"diffusion_noise", torch::empty({B, C, H, W})},
          {"label", torch::empty({B}, torch::kLong)},
          {"timestep", torch::empty({B}, torch::kLong)}};
}

void put_sample(Features& batch, int64_t b, const std::pair<int64_t, int64_t>& label_and_step) {
  batch["label"].data_ptr<int64_t>()[b] = label_and_step.first;
  batch["timestep"].data_ptr<int64_t>()[b] = label_and_step.second;
}

}  // namespace

std::pair<int64_t, int64_t> diffusion_sample(const DiffusionOptions& o, int64_t seed, int64_t id,
                                             const torch::Tensor& moments, int64_t label, float* input,
                                             float* diffusion_noise) {
  SplitMix64 rng{SplitMix64::mix(uint64_t(seed) * 0x9E3779B97F4A7C15ull + 0xD1B54A32D192ED03ull) ^ uint64_t(id)};
  const int64_t n = o.latent_channels * o.latent_size[0] * o.latent_size[1];
  if (rng.uniform() < o.label_dropout_rate) label = o.num_classes;
  const int64_t timestep = int64_t(rng.below(uint64_t(o.num_diffusion_steps)));
  fill_normal(rng, input, n);  // the VAE's noise first, then the diffusion noise
  fill_normal(rng, diffusion_noise, n);
  const float scale = float(o.vae_scaling_factor);
  if (!moments.defined()) return {label, timestep};  // synthetic: the latent is the standard normal itself
  const float* mean = moments.data_ptr<float>();
  const float* logvar = mean + n;
  for (int64_t i = 0; i < n; ++i)
    input[i] = (mean[i] + std::exp(0.5f * std::clamp(logvar[i], -30.0f, 20.0f)) * input[i]) * scale;
  return {label, timestep};
}

// ---- latent files ----------------------------------------------------------

DiffusionLatentSource::DiffusionLatentSource(const std::vector<std::string>& dirs, const DiffusionLatentOptions& o)
    : options_(o) {
  for (const auto& dir : dirs) {
    Folder f;
    static_cast<ClassFolders&>(f) = read_class_folders(
        dir, [](const std::string& path) { return path.size() >= 4 && path.compare(path.size() - 4, 4, ".npz") == 0; });
    f.dir = dir;
    if (f.files.empty())
      throw std::runtime_error(dir +
                               ": no latents (expected <class>/*.npz files, as modelzoo's "
                               "create_imagenet_latents.py writes them)");
    folders_.push_back(std::move(f));
  }
}

int64_t DiffusionLatentSource::num_samples() const {
  size_t most = 0;
  for (const auto& f : folders_) most = std::max(most, f.files.size());
  return int64_t(most);
}

int64_t DiffusionLatentSource::num_classes() const {
  size_t most = 0;
  for (const auto& f : folders_) most = std::max(most, f.classes.size());
  return int64_t(most);
}

std::string DiffusionLatentSource::describe() const {
  std::string out;
  for (const auto& f : folders_) out += (out.empty() ? "" : ", ") + f.dir;
  return out;
}

Features DiffusionLatentSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t>) const {
  const DiffusionLatentOptions& o = options_;
  const int64_t B = int64_t(ids.size()), C = o.latent_channels, H = o.latent_size[0], W = o.latent_size[1];
  Features batch = empty_batch(o, B);
  float* input = batch["input"].data_ptr<float>();
  float* noise = batch["diffusion_noise"].data_ptr<float>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t id = ids[size_t(b)], sample = id % num_samples();
    // Which directory: drawn from the seed and the stream sample, apart from the sample's own draws.
    SplitMix64 pick{SplitMix64::mix(uint64_t(o.shuffle_seed) ^ 0xA0761D6478BD642Full) + uint64_t(id)};
    const Folder& f = folders_[folders_.size() == 1 ? 0 : pick.below(folders_.size())];
    const auto& [path, cls] = f.files[size_t(sample) % f.files.size()];
    torch::Tensor moments = read_npz(path, {"vae_output"}).at("vae_output");
    if (moments.sizes() != torch::IntArrayRef({2 * C, H, W}))
      throw std::runtime_error(path + ": vae_output has shape " + c10::str(moments.sizes()) + ", expected (" +
                               std::to_string(2 * C) + ", " + std::to_string(H) + ", " + std::to_string(W) +
                               "): the VAE's mean and log-variance of a latent of latent_channels " +
                               std::to_string(C) + " and latent_size [" + std::to_string(H) + ", " + std::to_string(W) +
                               "]");
    moments = moments.to(torch::kFloat).contiguous();
    put_sample(batch, b,
               diffusion_sample(o, o.shuffle_seed, id, moments, cls, input + b * C * H * W, noise + b * C * H * W));
  }
  return batch;
}

const config::Schema<DiffusionLatentOptions>& DiffusionLatentOptions::schema() {
  static const config::Schema<DiffusionLatentOptions> s = [] {
    config::Schema<DiffusionLatentOptions> sc(
        "train_input/eval_input (DiffusionLatentImageNet1KProcessor)",
        "VAE latents of ImageNet in data_dir/<split>/<class>/*.npz, with DiT's noise, timesteps and label dropout.");
    return add_diffusion_fields(sc);
  }();
  return s;
}

namespace {

std::unique_ptr<DataLoader> open_latents(const DiffusionLatentOptions& o, const config::Origin& at) {
  if (o.data_dir.items.empty()) at.fail("data_dir", "required: the directory (or list) holding <split>/<class>/*.npz");
  std::vector<std::string> dirs;
  for (const auto& root : o.data_dir.items) {
    const std::string dir = require_directory(root, at) + "/" + o.split;
    if (!fs::is_directory(dir))
      at.fail("split", "no directory '" + o.split + "' in " + root + " (expected " + dir + "/<class>/*.npz)");
    dirs.push_back(dir);
  }
  std::shared_ptr<DiffusionLatentSource> source;
  try {
    source = std::make_shared<DiffusionLatentSource>(dirs, o);
  } catch (const std::runtime_error& e) {
    at.fail("data_dir", e.what());
  }
  if (source->num_classes() > o.num_classes)
    at.fail("num_classes", std::to_string(o.num_classes) + " classes, but " + source->describe() + " holds " +
                               std::to_string(source->num_classes()) + " class folders");
  return std::make_unique<MapStyleLoader>(source, o);
}

// Standard-normal latents and uniform labels, sample i's drawn from (seed, i).
class DiffusionSyntheticSource : public SampleSource {
 public:
  explicit DiffusionSyntheticSource(const DiffusionSyntheticOptions& o) : options_(o) {}
  int64_t num_samples() const override { return options_.num_examples; }
  std::string describe() const override { return "synthetic latents"; }
  bool reads_epoch() const override { return true; }
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t>) const override {
    const DiffusionSyntheticOptions& o = options_;
    const int64_t B = int64_t(ids.size()), n = o.latent_channels * o.latent_size[0] * o.latent_size[1];
    Features batch = empty_batch(o, B);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t sample = ids[size_t(b)] % num_samples();
      const int64_t label =
          int64_t(SplitMix64::mix(uint64_t(o.shuffle_seed) * 31 + uint64_t(sample)) % uint64_t(o.num_classes));
      put_sample(
          batch, b,
          diffusion_sample(o, o.shuffle_seed, ids[size_t(b)], {}, label, batch["input"].data_ptr<float>() + b * n,
                           batch["diffusion_noise"].data_ptr<float>() + b * n));
    }
    return batch;
  }

 private:
  DiffusionSyntheticOptions options_;
};

}  // namespace

const config::Schema<DiffusionSyntheticOptions>& DiffusionSyntheticOptions::schema() {
  using O = DiffusionSyntheticOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (DiffusionSyntheticDataProcessor)",
                         "Random latents and labels made on the fly, with DiT's draws (zoo's; no data files).");
    add_diffusion_fields(sc)
        .field("num_examples", &O::num_examples, "Samples per epoch.", config::positive<int64_t>())
        .renamed("num_samples", "num_examples")
        .validate([](const O& o, const auto& fail) {
          if (o.num_examples < o.batch_size)
            fail("num_examples", "fewer than batch_size (" + std::to_string(o.batch_size) + ")");
        });
    return sc;
  }();
  return s;
}

DataProcessor diffusion_latent_processor() {
  return make_data_processor<DiffusionLatentOptions>(
      "DiffusionLatentImageNet1KProcessor", "DiT's VAE latents of ImageNet (.npz files) with noise and timesteps.",
      {"input", "label", "diffusion_noise", "timestep"}, open_latents);
}

DataProcessor diffusion_synthetic_processor() {
  return make_data_processor<DiffusionSyntheticOptions>(
      "DiffusionSyntheticDataProcessor", "Random latents for DiT with noise and timesteps (zoo's).",
      {"input", "label", "diffusion_noise", "timestep"}, [](const DiffusionSyntheticOptions& o, const config::Origin&) {
        return std::make_unique<MapStyleLoader>(std::make_shared<DiffusionSyntheticSource>(o), o);
      });
}

}  // namespace zoo::data
