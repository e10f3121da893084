// Hugging Face <-> zoo conversion for GPT-2: a tiny HF-format model written
// by Python is converted, its zoo logits match a GPT-2 forward pass computed
// in Python from the HF weights, the round trip HF -> zoo -> HF is bitwise
// equal, and bad inputs name what is wrong.
#include <gtest/gtest.h>

#include "models/registry.h"
#include "runner/checkpoint.h"
#include "runner/convert/convert.h"
#include "runner/convert/safetensors.h"
#include "runner/convert/torch_pickle.h"
#include "runner/params.h"
#include "convert_fixtures.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::load_converted;
using zoo::testing::read_raw;
using zoo::testing::run_fixture;

namespace {

// Writes hf/model.safetensors + hf/config.json for a tiny GPT-2 with random
// weights, and ids.bin / logits.bin: GPT-2's forward pass (Conv1D, gelu_new,
// tied lm_head) written out with torch ops.
const char* kMakeHf = R"PY(
import json, math, struct, sys, torch
import torch.nn.functional as F
out = sys.argv[1]
torch.manual_seed(0)
V, C, L, H, P = 50, 16, 2, 4, 12
sd = {"transformer.wte.weight": torch.randn(V, C) * 0.1, "transformer.wpe.weight": torch.randn(P, C) * 0.1}
for i in range(L):
    h = f"transformer.h.{i}."
    for n, shape in [("ln_1.weight", (C,)), ("ln_1.bias", (C,)), ("ln_2.weight", (C,)), ("ln_2.bias", (C,)),
                     ("attn.c_attn.weight", (C, 3 * C)), ("attn.c_attn.bias", (3 * C,)),
                     ("attn.c_proj.weight", (C, C)), ("attn.c_proj.bias", (C,)),
                     ("mlp.c_fc.weight", (C, 4 * C)), ("mlp.c_fc.bias", (4 * C,)),
                     ("mlp.c_proj.weight", (4 * C, C)), ("mlp.c_proj.bias", (C,))]:
        sd[h + n] = torch.randn(*shape) * 0.2 + (1.0 if n.endswith("ln_1.weight") or n.endswith("ln_2.weight") else 0.0)
    sd[h + "attn.bias"] = torch.tril(torch.ones(P, P)).view(1, 1, P, P)  # HF's mask buffer
sd["transformer.ln_f.weight"] = torch.ones(C) + 0.1 * torch.randn(C)
sd["transformer.ln_f.bias"] = 0.1 * torch.randn(C)
import os
os.makedirs(out + "/hf", exist_ok=True)
write_safetensors(out + "/hf/model.safetensors", sd)
json.dump({"model_type": "gpt2", "vocab_size": V, "n_embd": C, "n_layer": L, "n_head": H, "n_positions": P,
           "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
           "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}, open(out + "/hf/config.json", "w"))
ids = torch.randint(0, V, (2, P))
x = sd["transformer.wte.weight"][ids] + sd["transformer.wpe.weight"][:P]
conv1d = lambda t, p: t @ sd[p + ".weight"] + sd[p + ".bias"]
for i in range(L):
    h = f"transformer.h.{i}."
    a = F.layer_norm(x, (C,), sd[h + "ln_1.weight"], sd[h + "ln_1.bias"], 1e-5)
    q, k, v = conv1d(a, h + "attn.c_attn").split(C, dim=-1)
    q, k, v = (t.view(2, P, H, C // H).transpose(1, 2) for t in (q, k, v))
    w = (q @ k.transpose(-1, -2)) / math.sqrt(C // H)
    w = w.masked_fill(torch.tril(torch.ones(P, P)) == 0, float("-inf")).softmax(-1)
    x = x + conv1d((w @ v).transpose(1, 2).reshape(2, P, C), h + "attn.c_proj")
    m = F.layer_norm(x, (C,), sd[h + "ln_2.weight"], sd[h + "ln_2.bias"], 1e-5)
    x = x + conv1d(F.gelu(conv1d(m, h + "mlp.c_fc"), approximate="tanh"), h + "mlp.c_proj")
x = F.layer_norm(x, (C,), sd["transformer.ln_f.weight"], sd["transformer.ln_f.bias"], 1e-5)
logits = x @ sd["transformer.wte.weight"].t()
os.makedirs(out + "/hf_bin", exist_ok=True)
import collections, shutil
torch.save(collections.OrderedDict(sd), out + "/hf_bin/pytorch_model.bin")
shutil.copy(out + "/hf/config.json", out + "/hf_bin/config.json")
open(out + "/ids.bin", "wb").write(ids.numpy().astype("int64").tobytes())
open(out + "/logits.bin", "wb").write(logits.numpy().astype("float32").tobytes())
)PY";

}  // namespace

TEST(Convert, Gpt2FromHuggingFaceMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  zoo::testing::TempDir dir;
  run_fixture(dir, "make_hf.py", kMakeHf);

  convert::run_convert({dir / "hf", "gpt2", "hf", "zoo", std::nullopt, dir / "zoo"});
  // The written params validate and rebuild the model the checkpoint fits.
  Params p = load_params(dir / "zoo/params.yaml", YAML::Node());
  EXPECT_EQ(p.runconfig.load_checkpoint_states.value().items, std::set<std::string>{"model"});
  EXPECT_EQ(p.runconfig.checkpoint_path.value(), dir / "zoo/checkpoint_0.mdl");
  auto model = load_converted(dir);
  torch::Tensor ids = read_raw(dir / "ids.bin", torch::kLong, {2, 12});
  torch::Tensor expected = read_raw(dir / "logits.bin", torch::kFloat, {2, 12, 50});
  torch::NoGradGuard no_grad;
  models::GenerationCache cache;
  torch::Tensor logits = model->next_logits(ids, cache);
  EXPECT_LT((logits - expected).abs().max().item<double>(), 1e-5);

  // zoo -> HF gives back the same tensors, bit for bit (HF's mask buffers aside).
  convert::run_convert({dir / "zoo/checkpoint_0.mdl", "gpt2", "zoo", "hf", std::nullopt, dir / "back"});
  auto original = convert::read_safetensors(dir / "hf/model.safetensors");
  auto back = convert::read_safetensors(dir / "back/model.safetensors");
  for (auto it = original.begin(); it != original.end();)
    it = it->first.find(".attn.bias") != std::string::npos ? original.erase(it) : std::next(it);
  ASSERT_EQ(original.size(), back.size());
  for (const auto& [k, t] : original) {
    ASSERT_TRUE(back.count(k)) << k;
    EXPECT_TRUE(torch::equal(t, back[k])) << k;
  }
  // pytorch_model.bin (torch.save) converts to the same zoo weights.
  convert::run_convert({dir / "hf_bin", "gpt2", "hf", "zoo", std::nullopt, dir / "zoo_bin"});
  auto from_st = ckpt::load_checkpoint_file(dir / "zoo/checkpoint_0.mdl").at("model").toGenericDict();
  auto from_bin = ckpt::load_checkpoint_file(dir / "zoo_bin/checkpoint_0.mdl").at("model").toGenericDict();
  ASSERT_EQ(from_st.size(), from_bin.size());
  for (const auto& kv : from_st) EXPECT_TRUE(torch::equal(kv.value().toTensor(), from_bin.at(kv.key()).toTensor()));
  auto cfg = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(cfg["n_embd"], 16);
  EXPECT_EQ(cfg["activation_function"], "gelu_new");
}

TEST(Convert, MissingAndUnexpectedKeysAreNamed) {
  zoo::testing::TempDir dir;
  convert::TensorMap t = {{"transformer.wte.weight", torch::zeros({10, 8})},
                          {"transformer.wpe.weight", torch::zeros({4, 8})},
                          {"transformer.extra.weight", torch::zeros({2})}};
  std::filesystem::create_directories(dir / "hf");
  convert::write_safetensors(dir / "hf/model.safetensors", t);
  zoo::testing::write_file(dir / "hf/config.json",
                           R"({"vocab_size": 10, "n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 4})");
  try {
    convert::run_convert({dir / "hf", "gpt2", "hf", "zoo", std::nullopt, dir / "zoo"});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing Hugging Face keys: transformer.h.0.ln_1.weight"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("unexpected Hugging Face keys: transformer.extra.weight"), std::string::npos)
        << e.what();
  }
  // A sharded checkpoint: the index's weight_map names each tensor's file.
  std::filesystem::create_directories(dir / "sharded");
  convert::write_safetensors(dir / "sharded/model-00001-of-00002.safetensors", {{"a", torch::ones({2})}});
  convert::write_safetensors(dir / "sharded/model-00002-of-00002.safetensors", {{"b", torch::zeros({3, 1})}});
  zoo::testing::write_file(dir / "sharded/model.safetensors.index.json",
                           R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", )"
                           R"("b": "model-00002-of-00002.safetensors"}})");
  auto shards = convert::read_hf_weights(dir / "sharded");
  ASSERT_EQ(shards.size(), 2u);
  EXPECT_TRUE(torch::equal(shards["b"], torch::zeros({3, 1})));
  zoo::testing::write_file(dir / "bad.safetensors", "xx");
  EXPECT_THROW(convert::read_safetensors(dir / "bad.safetensors"), std::runtime_error);
  EXPECT_THROW(convert::read_hf_weights(dir / "nowhere"), std::runtime_error);
}

// Files written by Python's torch.save: dtypes, views over shared storages,
// non-contiguous tensors and nested dicts come back exactly.
TEST(Convert, ReadsTorchSaveFiles) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  zoo::testing::TempDir dir;
  run_fixture(dir, "save.py", R"PY(
import collections, json, struct, sys, torch
out = sys.argv[1]
torch.manual_seed(0)
base = torch.randn(6, 4)
sd = collections.OrderedDict()
sd["a.weight"] = base
sd["a.view"] = base[2:5]                 # shares a's storage, with an offset
sd["a.t"] = base.t()                     # not contiguous
sd["half"] = torch.randn(3).half()
sd["bf16"] = torch.randn(2, 2).bfloat16()
sd["steps"] = torch.arange(5)
sd["flag"] = torch.tensor([True, False])
sd._metadata = {"": {"version": 1}}      # as nn.Module.state_dict() sets
torch.save(sd, out + "/state.pt")
torch.save({"model": sd, "global_step": 7, "note": "x"}, out + "/ckpt.pt")
write_safetensors(out + "/expected.safetensors", dict(sd))
)PY");
  auto expected = convert::read_safetensors(dir / "expected.safetensors");
  auto got = convert::tensor_dict(convert::read_torch_save(dir / "state.pt"));
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [k, t] : expected) {
    ASSERT_TRUE(got.count(k)) << k;
    EXPECT_EQ(got[k].scalar_type(), t.scalar_type()) << k;
    EXPECT_TRUE(torch::equal(got[k], t)) << k;
  }
  // As a checkpoint: {"model": state dict, "global_step": 7} loads as model weights and step.
  auto ckpt = ckpt::load_checkpoint_file(dir / "ckpt.pt");
  EXPECT_EQ(ckpt.at("global_step").toInt(), 7);
  EXPECT_TRUE(torch::equal(ckpt.at("model").toGenericDict().at("a.t").toTensor(), expected["a.t"]));
  zoo::testing::write_file(dir / "junk.pt", "PK not really a zip");
  EXPECT_THROW(ckpt::load_checkpoint_file(dir / "junk.pt"), std::runtime_error);
}

// GPT-NeoX: a tiny Hugging Face checkpoint (fused query_key_value laid out
// per head, partial rotary in NeoX's half-split layout, untied norms,
// parallel residual) converts to zoo's gptj family with the logits of NeoX's
// forward written in Python, and back to the same tensors bit for bit.
TEST(Convert, GptNeoxFromHuggingFaceMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  zoo::testing::TempDir dir;
  run_fixture(dir, "make_neox.py", R"PY(
import json, math, os, sys, torch
import torch.nn.functional as F
out = sys.argv[1]
torch.manual_seed(0)
V, C, L, H, P, F4 = 50, 32, 2, 4, 12, 64
D, R, base = C // H, 4, 1000.0   # rotary_pct 0.5 of the 8-dim head
sd = {"gpt_neox.embed_in.weight": torch.randn(V, C) * 0.1, "embed_out.weight": torch.randn(V, C) * 0.1}
for i in range(L):
    h = f"gpt_neox.layers.{i}."
    for n, shape in [("input_layernorm", (C,)), ("post_attention_layernorm", (C,))]:
        sd[h + n + ".weight"] = 1.0 + 0.1 * torch.randn(C)
        sd[h + n + ".bias"] = 0.1 * torch.randn(C)
    for n, o, inp in [("attention.query_key_value", 3 * C, C), ("attention.dense", C, C),
                      ("mlp.dense_h_to_4h", F4, C), ("mlp.dense_4h_to_h", C, F4)]:
        sd[h + n + ".weight"] = torch.randn(o, inp) * 0.2
        sd[h + n + ".bias"] = torch.randn(o) * 0.1
    sd[h + "attention.rotary_emb.inv_freq"] = 1.0 / base ** (torch.arange(0, R, 2).float() / R)  # a buffer
sd["gpt_neox.final_layer_norm.weight"] = 1.0 + 0.1 * torch.randn(C)
sd["gpt_neox.final_layer_norm.bias"] = 0.1 * torch.randn(C)
os.makedirs(out + "/hf", exist_ok=True)
write_safetensors(out + "/hf/model.safetensors", sd)
json.dump({"model_type": "gpt_neox", "vocab_size": V, "hidden_size": C, "num_hidden_layers": L,
           "num_attention_heads": H, "intermediate_size": F4, "max_position_embeddings": P, "rotary_pct": 0.5,
           "rotary_emb_base": base, "use_parallel_residual": True, "layer_norm_eps": 1e-5, "hidden_act": "gelu",
           "tie_word_embeddings": False}, open(out + "/hf/config.json", "w"))

def rotate_half(x):
    return torch.cat([-x[..., R // 2:], x[..., : R // 2]], -1)

ids = torch.randint(0, V, (2, P))
x = sd["gpt_neox.embed_in.weight"][ids]
t = torch.arange(P).float()[:, None] * (1.0 / base ** (torch.arange(0, R, 2).float() / R))
cos, sin = torch.cat([t, t], -1).cos(), torch.cat([t, t], -1).sin()   # (P, R)
lin = lambda v, n: F.linear(v, sd[n + ".weight"], sd[n + ".bias"])
ln = lambda v, n: F.layer_norm(v, (C,), sd[n + ".weight"], sd[n + ".bias"], 1e-5)
for i in range(L):
    h = f"gpt_neox.layers.{i}."
    qkv = lin(ln(x, h + "input_layernorm"), h + "attention.query_key_value").view(2, P, H, 3, D)
    q, k, v = (qkv[..., j, :].transpose(1, 2) for j in range(3))   # (2, H, P, D)
    q = torch.cat([q[..., :R] * cos + rotate_half(q[..., :R]) * sin, q[..., R:]], -1)
    k = torch.cat([k[..., :R] * cos + rotate_half(k[..., :R]) * sin, k[..., R:]], -1)
    w = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(torch.ones(P, P).triu(1).bool(), float("-inf")).softmax(-1)
    a = lin((w @ v).transpose(1, 2).reshape(2, P, C), h + "attention.dense")
    m = lin(F.gelu(lin(ln(x, h + "post_attention_layernorm"), h + "mlp.dense_h_to_4h")), h + "mlp.dense_4h_to_h")
    x = x + a + m
logits = ln(x, "gpt_neox.final_layer_norm") @ sd["embed_out.weight"].t()
open(out + "/ids.bin", "wb").write(ids.numpy().astype("int64").tobytes())
open(out + "/logits.bin", "wb").write(logits.numpy().astype("float32").tobytes())
)PY");
  convert::run_convert({dir / "hf", "gpt-neox", "hf", "zoo", std::nullopt, dir / "zoo"});
  auto model = load_converted(dir);
  torch::Tensor ids = read_raw(dir / "ids.bin", torch::kLong, {2, 12});
  torch::Tensor expected = read_raw(dir / "logits.bin", torch::kFloat, {2, 12, 50});
  torch::NoGradGuard no_grad;
  models::GenerationCache cache;
  EXPECT_LT((model->next_logits(ids, cache) - expected).abs().max().item<double>(), 1e-5);

  convert::run_convert({dir / "zoo/checkpoint_0.mdl", "gpt-neox", "zoo", "hf", std::nullopt, dir / "back"});
  auto original = convert::read_safetensors(dir / "hf/model.safetensors");
  auto back = convert::read_safetensors(dir / "back/model.safetensors");
  for (auto it = original.begin(); it != original.end();)
    it = it->first.find("rotary_emb.inv_freq") != std::string::npos ? original.erase(it) : std::next(it);
  ASSERT_EQ(original.size(), back.size());
  for (const auto& [k, t] : original) {
    ASSERT_TRUE(back.count(k)) << k;
    EXPECT_TRUE(torch::equal(t, back[k])) << k;
  }
  auto cfg = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(cfg["rotary_pct"], 0.5);
  EXPECT_EQ(cfg["rotary_emb_base"], 1000.0);
  // A sequential NeoX (use_parallel_residual false) is refused by name, not converted to another model.
  auto config = nlohmann::json::parse(zoo::testing::read_file(dir / "hf/config.json"));
  config["use_parallel_residual"] = false;
  zoo::testing::write_file(dir / "hf/config.json", config.dump());
  try {
    convert::run_convert({dir / "hf", "gpt-neox", "hf", "zoo", std::nullopt, dir / "zoo2"});
    ADD_FAILURE() << "a sequential NeoX converted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("use_parallel_residual = false"), std::string::npos) << e.what();
  }
}
