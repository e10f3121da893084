// What the Hugging Face conversion tests share: Python fixtures that write a
// tiny HF checkpoint (safetensors by hand, no package needed) with the
// logits of the family's forward pass, and reading back what zoo wrote.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "models/registry.h"
#include "runner/checkpoint.h"
#include "runner/convert/safetensors.h"
#include "runner/params.h"
#include "test_util.h"

namespace zoo::testing {

// Prepended to the Python fixtures.
inline const char* kPySafetensors = R"PY(
import json, struct, torch
def write_safetensors(path, sd):
    names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64", torch.bool: "BOOL"}
    header, blobs, off = {}, [], 0
    for k in sorted(sd):
        t = sd[k].contiguous()
        b = t.view(torch.uint8).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[k] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hj = json.dumps(header).encode()
    open(path, "wb").write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
)PY";

// Runs a Python fixture (with write_safetensors available) on `dir`, then `args`.
inline void run_fixture(const TempDir& dir, const std::string& name, const std::string& body,
                        const std::string& args = "") {
  std::string script = write_file(dir / name, std::string(kPySafetensors) + body);
  auto r = run_command("/usr/bin/python3 " + script + " " + dir.path() + (args.empty() ? "" : " " + args));
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

// The model a conversion wrote to dir/zoo, built from its params with its weights loaded.
inline std::shared_ptr<models::Model> load_converted(const TempDir& dir) {
  Params p = load_params(dir / "zoo/params.yaml", YAML::Node());
  auto model = p.model->build(torch::TensorOptions());
  ckpt::load_model_state_dict(*model, ckpt::load_checkpoint_file(dir / "zoo/checkpoint_0.mdl").at("model").toGenericDict(),
                              true, "converted");
  model->eval();
  return model;
}

inline torch::Tensor read_raw(const std::string& path, torch::ScalarType type, std::vector<int64_t> shape) {
  std::string bytes = read_file(path);
  torch::Tensor t = torch::empty(shape, type);
  EXPECT_EQ(bytes.size(), t.nbytes()) << path;
  std::memcpy(t.data_ptr(), bytes.data(), std::min<size_t>(bytes.size(), t.nbytes()));
  return t;
}

// The safetensors file `back` (an export of a conversion of `original`)
// holds exactly `original`'s tensors, bit for bit.
inline void expect_exported_bit_for_bit(const std::string& original_path, const std::string& back_path) {
  auto original = convert::read_safetensors(original_path);
  auto back = convert::read_safetensors(back_path);
  EXPECT_EQ(back.size(), original.size());
  for (const auto& [k, t] : original) {
    ASSERT_TRUE(back.count(k)) << k << " did not come back";
    EXPECT_TRUE(torch::equal(t, back[k])) << k;
  }
}

// `run` must throw std::runtime_error whose message contains every `parts`.
inline void expect_refused(const std::function<void()>& run, const std::vector<std::string>& parts) {
  try {
    run();
    ADD_FAILURE() << "no error; expected one naming " << parts.front();
  } catch (const std::runtime_error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace zoo::testing
