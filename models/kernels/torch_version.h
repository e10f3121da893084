// LibTorch's version for the preprocessor, where zoo keeps the 1.13 path
// beside a 2.x API. Defines: ZOO_TORCH_AT_LEAST.
#pragma once

#include <torch/version.h>

// True on LibTorch major.minor and later.
#define ZOO_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
