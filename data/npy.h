// NumPy's files: .npy arrays and .npz archives of them (np.savez, and
// np.savez_compressed's deflated members), read into tensors. What modelzoo's
// DiT latent files are (create_imagenet_latents.py writes one np.savez per image).
// Defines: parse_npy, read_npz.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace zoo::data {

// The array in `bytes` (a whole .npy file); `what` names it in errors.
// Little-endian bool, int8..int64, uint8, float16/32/64; C or Fortran order.
// Throws std::runtime_error naming `what` and what was expected.
torch::Tensor parse_npy(const std::vector<char>& bytes, const std::string& what);

// The arrays `names` of the .npz file `path` (member "<name>.npy"); every
// member when `names` is empty. Throws std::runtime_error naming the file
// and the member when one is missing or unreadable.
std::map<std::string, torch::Tensor> read_npz(const std::string& path, const std::vector<std::string>& names = {});

}  // namespace zoo::data
