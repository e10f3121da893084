// zoo's CUDA kernels for an embedding table's gradient (models/kernels/cuda/
// embedding.cu): dW[v] = the sum of dy's rows whose id is v, deterministic
// and without atomics, from the ids sorted. LibTorch's sort-based backward
// moves several times the bytes the gradient needs. Plain C++, so that callers need no CUDA
// headers. Defines: embedding_grad_tasks, embedding_grad.
#pragma once

#include <cstdint>

namespace zoo::cuda {

// Sorted ids are split into tasks of this many; each partial sum buffer
// embedding_grad takes holds embedding_grad_tasks(n) rows of C floats.
constexpr int64_t kEmbeddingTaskRows = 32;
int64_t embedding_grad_tasks(int64_t n);

// grad (V, C float32, zero where no id points) gets, for each id v among
// `sorted` (n ids, ascending, each in [0, V)), the sum of dy's rows
// order[i] (dy: (rows, C) float32) over the i where sorted[i] == v, added in
// the order of i. head_partial and own_partial are scratch (tasks x C
// floats each). Launches on `stream` (a cudaStream_t) of the current
// device; returns nullptr, or the CUDA error's message.
const char* embedding_grad(const int64_t* sorted, const int64_t* order, const float* dy, int64_t n, int64_t C,
                           float* grad, float* head_partial, float* own_partial, void* stream);

}  // namespace zoo::cuda
