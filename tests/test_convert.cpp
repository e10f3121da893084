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
  if (!zoo::testing::have_python_torch()) GTEST_SKIP() << "/usr/bin/python3 with python3-torch is not installed";
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
  if (!zoo::testing::have_python_torch()) GTEST_SKIP() << "/usr/bin/python3 with python3-torch is not installed";
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

// LLaMA: rotary (HF half-split vs modelzoo interleaved rows), grouped-query
// attention, RMSNorm and SwiGLU against a LLaMA forward written out in Python.
namespace {

// A tiny LLaMA (grouped-query attention, SwiGLU, RMSNorm, half-split rotary,
// `rope_scaling` as given) in Hugging Face's layout, and its logits written
// in Python from the published math.
const char* kMakeLlama = R"PY(
import json, math, os, struct, sys, torch
import torch.nn.functional as F
out = sys.argv[1]
CASE = json.loads(open(out + "/case.json").read())
SCALING = CASE["rope_scaling"]
torch.manual_seed(1)
V, C, H, G, L, I, P, eps = 40, 32, 4, 2, 2, 48, 16, 1e-6
D = CASE["head_dim"] or C // H
E, K = CASE["experts"], 2  # Mixtral: E experts per layer, each token through the top K
sd = {"model.embed_tokens.weight": torch.randn(V, C) * 0.3, "model.norm.weight": 1 + 0.1 * torch.randn(C),
      "lm_head.weight": torch.randn(V, C) * 0.2}
for i in range(L):
    p = f"model.layers.{i}."
    sd.update({p + "self_attn.q_proj.weight": torch.randn(H * D, C) * 0.2, p + "self_attn.k_proj.weight": torch.randn(G * D, C) * 0.2,
               p + "self_attn.v_proj.weight": torch.randn(G * D, C) * 0.2, p + "self_attn.o_proj.weight": torch.randn(C, H * D) * 0.2,
               p + "input_layernorm.weight": 1 + 0.1 * torch.randn(C), p + "post_attention_layernorm.weight": 1 + 0.1 * torch.randn(C)})
    if E:
        sd[p + "block_sparse_moe.gate.weight"] = torch.randn(E, C)
        for e in range(E):
            q = p + f"block_sparse_moe.experts.{e}."
            sd.update({q + "w1.weight": torch.randn(I, C) * 0.2, q + "w3.weight": torch.randn(I, C) * 0.2,
                       q + "w2.weight": torch.randn(C, I) * 0.2})
    else:
        sd.update({p + "mlp.gate_proj.weight": torch.randn(I, C) * 0.2, p + "mlp.up_proj.weight": torch.randn(I, C) * 0.2,
                   p + "mlp.down_proj.weight": torch.randn(C, I) * 0.2})
os.makedirs(out + "/hf", exist_ok=True)
write_safetensors(out + "/hf/model.safetensors", sd)
config = {"model_type": "mixtral" if E else "llama", "vocab_size": V, "hidden_size": C, "intermediate_size": I,
          "num_hidden_layers": L, "num_attention_heads": H, "num_key_value_heads": G, "max_position_embeddings": P,
          "rms_norm_eps": eps, "tie_word_embeddings": False, "rope_scaling": SCALING, "head_dim": D}
if E:
    config.update({"num_local_experts": E, "num_experts_per_tok": K, "router_aux_loss_coef": 0.02, "sliding_window": None})
json.dump(config, open(out + "/hf/config.json", "w"))
rms = lambda x, w: w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
inv = 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D))
if SCALING:  # Llama 3.1's bands: short wavelengths kept, long ones / factor, the ones between blended
    f, lo, hi, orig = (SCALING[k] for k in ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"))
    wavelen = 2 * math.pi / inv
    blend = (orig / wavelen - lo) / (hi - lo)
    inv = torch.where(wavelen > orig / lo, inv / f,
                      torch.where(wavelen < orig / hi, inv, (1 - blend) * inv / f + blend * inv))
ang = torch.outer(torch.arange(P).float(), inv)
cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
rot = lambda x: torch.cat([-x[..., D // 2:], x[..., :D // 2]], -1)
ids = torch.randint(0, V, (2, P))
x = sd["model.embed_tokens.weight"][ids]
for i in range(L):
    p = f"model.layers.{i}."
    a = rms(x, sd[p + "input_layernorm.weight"])
    q = (a @ sd[p + "self_attn.q_proj.weight"].t()).view(2, P, H, D).transpose(1, 2)
    k = (a @ sd[p + "self_attn.k_proj.weight"].t()).view(2, P, G, D).transpose(1, 2)
    v = (a @ sd[p + "self_attn.v_proj.weight"].t()).view(2, P, G, D).transpose(1, 2)
    q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
    k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
    w = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(torch.tril(torch.ones(P, P)) == 0, float("-inf")).softmax(-1)
    x = x + (w @ v).transpose(1, 2).reshape(2, P, H * D) @ sd[p + "self_attn.o_proj.weight"].t()
    m = rms(x, sd[p + "post_attention_layernorm.weight"])
    swiglu = lambda gate, up, down: (F.silu(m @ sd[gate].t()) * (m @ sd[up].t())) @ sd[down].t()
    if not E:
        x = x + swiglu(p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", p + "mlp.down_proj.weight")
        continue
    # Mixtral's block: a float32 softmax router, the top K renormalized to sum to 1
    probs = (m @ sd[p + "block_sparse_moe.gate.weight"].t()).float().softmax(-1)
    top, chosen = probs.topk(K)
    top = top / top.sum(-1, keepdim=True)
    for e in range(E):
        q = p + f"block_sparse_moe.experts.{e}."
        x = x + (top * (chosen == e)).sum(-1, keepdim=True) * swiglu(q + "w1.weight", q + "w3.weight", q + "w2.weight")
logits = rms(x, sd["model.norm.weight"]) @ sd["lm_head.weight"].t()
open(out + "/ids.bin", "wb").write(ids.numpy().astype("int64").tobytes())
open(out + "/logits.bin", "wb").write(logits.numpy().astype("float32").tobytes())
)PY";

// Converts that model to zoo and checks the logits (whole and decoded with a
// cache), and the export back: the same tensors bit for bit, the same config.
// experts > 0: Mixtral's sparse experts in place of the MLPs.
void check_llama_conversion(const nlohmann::json& rope_scaling, const nlohmann::json& head_dim = nullptr,
                            int64_t experts = 0) {
  zoo::testing::TempDir dir;
  zoo::testing::write_file(dir / "case.json", nlohmann::json{{"rope_scaling", rope_scaling}, {"head_dim", head_dim},
                                                             {"experts", experts}}.dump());
  run_fixture(dir, "make_llama.py", kMakeLlama);
  const std::string converter = experts ? "mixtral" : "llama";
  convert::run_convert({dir / "hf", converter, "hf", "zoo", std::nullopt, dir / "zoo"});
  auto model = load_converted(dir);
  torch::NoGradGuard no_grad;
  torch::Tensor ids = read_raw(dir / "ids.bin", torch::kLong, {2, 16});
  torch::Tensor expected = read_raw(dir / "logits.bin", torch::kFloat, {2, 16, 40});
  models::GenerationCache full;
  EXPECT_LT((model->next_logits(ids, full) - expected).abs().max().item<double>(), 1e-4);
  // Incremental decoding with the cache agrees (rotary positions continue).
  models::GenerationCache cache;
  std::vector<torch::Tensor> parts = {model->next_logits(ids.narrow(1, 0, 9), cache)};
  for (int64_t t = 9; t < 16; ++t) parts.push_back(model->next_logits(ids.narrow(1, t, 1), cache));
  EXPECT_LT((torch::cat(parts, 1) - expected).abs().max().item<double>(), 1e-4);

  convert::run_convert({dir / "zoo/checkpoint_0.mdl", converter, "zoo", "hf", std::nullopt, dir / "back"});
  auto original = convert::read_safetensors(dir / "hf/model.safetensors");
  auto back = convert::read_safetensors(dir / "back/model.safetensors");
  ASSERT_EQ(original.size(), back.size());
  for (const auto& [k, t] : original) EXPECT_TRUE(back.count(k) && torch::equal(t, back[k])) << k;
  auto cfg = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(cfg["num_key_value_heads"], 2);
  EXPECT_EQ(cfg["rope_scaling"], rope_scaling);
  EXPECT_EQ(cfg["head_dim"], head_dim.is_null() ? nlohmann::json(8) : head_dim);
  if (experts) {
    EXPECT_EQ(cfg["architectures"][0], "MixtralForCausalLM");
    EXPECT_EQ(cfg["num_local_experts"], experts);
    EXPECT_EQ(cfg["num_experts_per_tok"], 2);
    EXPECT_EQ(cfg["router_aux_loss_coef"], 0.02);
  }
}

}  // namespace

TEST(Convert, LlamaFromHuggingFaceMatchesTheReferenceAndRoundTrips) {
  if (!zoo::testing::have_python_torch()) GTEST_SKIP() << "/usr/bin/python3 with python3-torch is not installed";
  check_llama_conversion(nullptr);
}

// Llama 3.1 / 3.2 / 3.3 checkpoints: rope_scaling llama3 becomes modelzoo's
// pos_scaling_type llama3. The head size (8) and original context (64) put
// one frequency in each band: kept, blended and divided by the factor.
TEST(Convert, Llama31RopeScalingMatchesTheReferenceAndRoundTrips) {
  if (!zoo::testing::have_python_torch()) GTEST_SKIP() << "/usr/bin/python3 with python3-torch is not installed";
  check_llama_conversion({{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}});
}

// Mixtral: each layer's router and 4 SwiGLU experts (w1 gate, w3 up, w2
// down) become modelzoo's `moe` block; logits match HF's routing (float32
// softmax, top 2 renormalized) and the export is bitwise the original.
TEST(Convert, MixtralFromHuggingFaceMatchesTheReferenceAndRoundTrips) {
  if (!zoo::testing::have_python_torch()) GTEST_SKIP() << "/usr/bin/python3 with python3-torch is not installed";
  check_llama_conversion(nullptr, nullptr, 4);
}

// Mistral NeMo's head_dim (128 at hidden_size 5120, 32 heads) is modelzoo's
// attention_inner_dim: q/k/v 64 wide here at hidden_size 32.
TEST(Convert, LlamaHeadDimIsTheAttentionInnerDim) {
  if (!zoo::testing::have_python_torch()) GTEST_SKIP() << "/usr/bin/python3 with python3-torch is not installed";
  check_llama_conversion(nullptr, 16);
}

// Mistral's sliding window travels both ways; config.json fields that change
// the math and that zoo cannot represent are refused by name, never dropped.
TEST(Convert, MistralSlidingWindowIsCarriedAndUnrepresentableFieldsAreRefused) {
  const models::ModelFamily& family = models::find_model("mistral");
  const models::HfAdapter& mistral = family.hf.at("mistral");
  nlohmann::json config = {{"model_type", "mistral"}, {"vocab_size", 64}, {"hidden_size", 32},
                           {"num_hidden_layers", 2},  {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                           {"intermediate_size", 48}, {"max_position_embeddings", 64}, {"sliding_window", 8},
                           {"rope_theta", 1e6},       {"hidden_act", "silu"}, {"rope_scaling", nullptr}};
  YAML::Node model = mistral.config_from_hf(config);
  EXPECT_EQ(model["attention_sliding_window_length"].as<int64_t>(), 8);
  model.remove("name");
  auto spec = family.parse(model, config::Context{"converted", "model", nullptr});
  const nlohmann::json back = mistral.config_to_hf(*spec);
  EXPECT_EQ(back.at("model_type"), "mistral");
  EXPECT_EQ(back.at("sliding_window"), 8);
  EXPECT_EQ(back.at("rope_theta"), 1e6);
  try {
    family.hf.at("llama").config_to_hf(*spec);
    ADD_FAILURE() << "a LLaMA config.json would drop the sliding window";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("LLaMA has no sliding window; convert with --model mistral"), std::string::npos);
  }
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}},
           {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"beta_fast", 2.0}}},
           {"attention_bias", true},
           {"mlp_bias", true}}) {
    nlohmann::json changed = config;
    changed[key] = value;
    try {
      mistral.config_from_hf(changed);
      ADD_FAILURE() << "no error for " << key;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("config.json: " + key + " = "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("changes the model's math"), std::string::npos) << e.what();
    }
  }
}

// GPT-NeoX: a tiny Hugging Face checkpoint (fused query_key_value laid out
// per head, partial rotary in NeoX's half-split layout, untied norms,
// parallel residual) converts to zoo's gptj family with the logits of NeoX's
// forward written in Python, and back to the same tensors bit for bit.
TEST(Convert, GptNeoxFromHuggingFaceMatchesTheReferenceAndRoundTrips) {
  if (!zoo::testing::have_python_torch()) GTEST_SKIP() << "/usr/bin/python3 with python3-torch is not installed";
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
