// DiT's data (modelzoo's DiffusionBaseProcessor): each sample is a VAE
// latent with the draws of one diffusion training step: the latent sampled
// from the VAE's diagonal Gaussian (mean + std * noise, times
// vae_scaling_factor), the label replaced by the unconditional one
// (num_classes) with probability label_dropout_rate, a timestep in
// [0, num_diffusion_steps) and the diffusion noise. zoo draws them from
// (shuffle_seed, epoch, sample), so a resumed run sees the same draws and
// every eval pass the same noise (modelzoo draws them per batch at random).
//   DiffusionLatentImageNet1KProcessor: latents that modelzoo's
//     create_imagenet_latents.py wrote, data_dir/<split>/<class>/*.npz with
//     `vae_output` (2C, H, W) = the VAE's mean and log-variance.
//   DiffusionSyntheticDataProcessor: standard-normal latents and uniform
//     labels made on the fly (modelzoo declares it; zoo's is for smoke tests
//     and benchmarks).
// Defines: DiffusionOptions, DiffusionLatentOptions, DiffusionSyntheticOptions,
// diffusion_sample, DiffusionLatentSource, diffusion_latent_processor,
// diffusion_synthetic_processor.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "data/image_transforms.h"
#include "data/loader.h"
#include "data/processors/imagenet.h"
#include "data/registry.h"

namespace zoo::data {

struct DiffusionOptions : LoaderOptions {
  std::string split = "train";
  int64_t num_classes = 1000;           // the model's; labels equal to it are the unconditional label
  int64_t num_diffusion_steps = 1000;   // the model's
  double label_dropout_rate = 0.0;      // the model's
  std::vector<int64_t> latent_size;     // the model's (or its vae's) [H, W]
  int64_t latent_channels = 4;          // the model's (or its vae's)
  double vae_scaling_factor = 0.18215;  // the model's vae.scaling_factor
  // Accepted as modelzoo's files give them; the model's keys decide.
  int64_t image_channels = 3;
  std::optional<std::vector<int64_t>> image_size;
  std::optional<std::string> schedule_name;
  std::optional<bool> var_loss;
  bool noaugment = false;
  std::vector<TransformSpec> transforms;
};

struct DiffusionLatentOptions : DiffusionOptions {
  static const config::Schema<DiffusionLatentOptions>& schema();
};

struct DiffusionSyntheticOptions : DiffusionOptions {
  int64_t num_examples = 1024;
  static const config::Schema<DiffusionSyntheticOptions>& schema();
};

// Stream sample `id` (epoch * samples + sample) of one latent: `moments` is
// the VAE's (2C, H, W) mean and log-variance, or undefined for a standard
// normal latent (synthetic data). Writes input, diffusion_noise (C, H, W)
// and returns {label after dropout, timestep}.
std::pair<int64_t, int64_t> diffusion_sample(const DiffusionOptions& options, int64_t seed, int64_t id,
                                             const torch::Tensor& moments, int64_t label, float* input,
                                             float* diffusion_noise);

// The latent files of one or more data_dir entries, each laid out
// <dir>/<split>/<class>/*.npz. With several directories (modelzoo's files
// pair ImageNet's latents with those of its flipped images) each stream
// sample picks one of them at random and takes its sample index modulo that
// directory's size, as modelzoo's CategoricalDataset; the epoch is the largest's.
class DiffusionLatentSource : public SampleSource {
 public:
  // Throws std::runtime_error naming the directory when it holds no latents.
  DiffusionLatentSource(const std::vector<std::string>& dirs, const DiffusionLatentOptions& options);
  int64_t num_samples() const override;
  std::string describe() const override;
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;
  bool reads_epoch() const override { return true; }
  int64_t num_classes() const;  // class folders of the largest directory

 private:
  struct Folder : ClassFolders {
    std::string dir;
  };
  std::vector<Folder> folders_;
  DiffusionLatentOptions options_;
};

DataProcessor diffusion_latent_processor();
DataProcessor diffusion_synthetic_processor();

}  // namespace zoo::data
