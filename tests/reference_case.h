// For the tests that check zoo's logits against a forward pass written in
// Python: the model's state, the ids and zoo's logits, in one file that
// torch.load reads.
#pragma once

#include <torch/torch.h>

#include <string>

#include "models/gpt2/gpt2.h"
#include "runner/checkpoint/checkpoint.h"

namespace zoo::testing {

// Writes {state, ids, logits} of `m` for `ids` to `path`.
inline void write_reference_case(models::Gpt2Model& m, const torch::Tensor& ids, const std::string& path) {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("state", ckpt::model_state_dict(m));
  d.insert("ids", ids);
  d.insert("logits", m.logits(ids).detach());
  ckpt::save_checkpoint_file(path, d);
}

}  // namespace zoo::testing
