// zoo convert for GPT-J, CodeGen, Falcon, BLOOM, MPT, BTLM, Jais, SantaCoder
// and StarCoder. For each, Python writes a tiny random checkpoint in the Hugging Face
// model's own layout and key names, and the logits of that model's forward
// pass written here from its published math (transformers cannot be
// installed here). zoo must convert it (picking the converter from
// config.json's model_type), give those logits to 1e-5, and convert back to
// the same tensors bit for bit. Config fields zoo cannot represent, and
// exports the target cannot hold, must be refused by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "convert_fixtures.h"
#include "models/registry.h"
#include "runner/convert/convert.h"
#include "runner/convert/safetensors.h"

using namespace zoo;
using zoo::testing::expect_refused;
using zoo::testing::TempDir;

namespace {

// The shared pieces of the reference forwards, written from the papers and
// model cards, not from zoo's code.
const char* kPyDecoder = R"PY(
import math, os, sys
import torch.nn.functional as F
out = sys.argv[1]
torch.manual_seed(0)
B, T, V = 2, 12, 50
HF_ONLY = []   # buffers and tied copies the round trip does not give back

def rnd(*shape, scale=0.2):
    return torch.randn(*shape) * scale

def norm_w(n):
    return 1.0 + 0.1 * torch.randn(n)

def lin(sd, x, name, conv1d=False):   # nn.Linear stores (out, in); GPT-2's Conv1D (in, out)
    w = sd[name + ".weight"]
    y = x @ w if conv1d else x @ w.t()
    return y + sd[name + ".bias"] if name + ".bias" in sd else y

def ln(sd, x, name, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), sd[name + ".weight"], sd.get(name + ".bias"), eps)

def heads(x, n):   # (B, T, n * D) -> (B, n, T, D)
    return x.reshape(x.shape[0], x.shape[1], n, -1).transpose(1, 2)

def alibi_slopes(n):   # Press et al.: 2^(-8k/n); n not a power of two: those of the power below, then every other of twice it
    pow2 = lambda m: [2.0 ** (-8.0 * (k + 1) / m) for k in range(m)]
    if math.log2(n).is_integer():
        return pow2(n)
    p = 2 ** int(math.floor(math.log2(n)))
    return pow2(p) + pow2(2 * p)[0::2][: n - p]

def attend(q, k, v, scale, slopes=None):
    # q (B, H, T, D); k, v (B, G, T, D), group g serving query heads g*H/G .. (g+1)*H/G - 1
    H, G = q.shape[1], k.shape[1]
    k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
    s = q @ k.transpose(-1, -2) * scale
    if slopes is not None:   # ALiBi: slope x (key position - query position)
        s = s + torch.tensor(slopes)[:, None, None] * (torch.arange(T)[None, :] - torch.arange(T)[:, None])
    s = s.masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf"))
    return (s.softmax(-1) @ v).transpose(1, 2).reshape(q.shape[0], T, -1)

def rope(x, R, base, interleaved):
    # Rotates the first R dims of each head by position x base^(-2j/R): as pairs (2j, 2j+1)
    # (GPT-J) or as halves (j, j + R/2) (GPT-NeoX, LLaMA, Falcon).
    f = torch.arange(T).float()[:, None] * (1.0 / base ** (torch.arange(0, R, 2).float() / R))
    cos, sin, r = f.cos(), f.sin(), x[..., :R]
    if interleaved:
        a, b = r[..., 0::2], r[..., 1::2]
        r = torch.stack([a * cos - b * sin, b * cos + a * sin], -1).flatten(-2)
    else:
        a, b = r[..., : R // 2], r[..., R // 2:]
        r = torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
    return torch.cat([r, x[..., R:]], -1)

def finish(sd, config, logits, ids):
    os.makedirs(out + "/hf", exist_ok=True)
    write_safetensors(out + "/hf/model.safetensors", sd)
    json.dump(config, open(out + "/hf/config.json", "w"))
    open(out + "/hf_only.txt", "w").write("\n".join(HF_ONLY))
    open(out + "/ids.bin", "wb").write(ids.numpy().astype("int64").tobytes())
    open(out + "/logits.bin", "wb").write(logits.detach().numpy().astype("float32").tobytes())

ids = torch.randint(0, V, (B, T))
)PY";

// Converts the fixture's dir/hf with the converter its model_type picks,
// checks the logits, converts back with `converter` and checks every tensor
// (but the fixture's HF_ONLY) comes back bit for bit under its name (or with
// "transformer." added: a base model's keys). `more` checks the rest.
void expect_converts(const std::string& converter, const std::string& fixture,
                     const std::function<void(const TempDir&)>& more = {}) {
  TempDir dir;
  zoo::testing::run_fixture(dir, converter + ".py", std::string(kPyDecoder) + fixture);
  if (::testing::Test::HasFatalFailure()) return;
  convert::run_convert({dir / "hf", "", "hf", "zoo", std::nullopt, dir / "zoo"});
  auto model = zoo::testing::load_converted(dir);
  torch::Tensor ids = zoo::testing::read_raw(dir / "ids.bin", torch::kLong, {2, 12});
  torch::Tensor expected = zoo::testing::read_raw(dir / "logits.bin", torch::kFloat, {2, 12, 50});
  {
    torch::NoGradGuard no_grad;
    models::GenerationCache cache;
    EXPECT_LT((model->next_logits(ids, cache) - expected).abs().max().item<double>(), 1e-5) << converter;
  }
  convert::run_convert({dir / "zoo/checkpoint_0.mdl", converter, "zoo", "hf", std::nullopt, dir / "back"});
  auto original = convert::read_safetensors(dir / "hf/model.safetensors");
  auto back = convert::read_safetensors(dir / "back/model.safetensors");
  std::string hf_only = zoo::testing::read_file(dir / "hf_only.txt");
  size_t compared = 0;
  for (const auto& [k, t] : original) {
    if (("\n" + hf_only + "\n").find("\n" + k + "\n") != std::string::npos) continue;
    const std::string name = back.count(k) ? k : "transformer." + k;
    ASSERT_TRUE(back.count(name)) << converter << ": " << k << " did not come back";
    EXPECT_TRUE(torch::equal(t, back[name])) << converter << ": " << k;
    ++compared;
  }
  EXPECT_EQ(compared, back.size()) << converter << ": the export wrote tensors the original did not have";
  if (more) more(dir);
}

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(zoo::testing::read_file(path)); }

// hf/config.json changed by `edit`, converted again: an error naming `parts`.
void expect_config_refused(const TempDir& dir, const std::function<void(nlohmann::json&)>& edit,
                           const std::vector<std::string>& parts) {
  nlohmann::json c = read_json(dir / "hf/config.json");
  edit(c);
  zoo::testing::write_file(dir / "edited.json", c.dump());
  expect_refused([&] { convert::run_convert({dir / "hf", "", "hf", "zoo", std::string(dir / "edited.json"), dir / "z2"}); },
                 parts);
}

bool have_python() { return zoo::testing::have_fixture_torch(); }
#define SKIP_WITHOUT_PYTHON() \
  if (!have_python()) GTEST_SKIP() << "/usr/bin/python3 with python3-torch is not installed"

}  // namespace

// GPT-J: separate q/k/v without biases, one norm feeding attention and FFN in
// parallel, partial rotary on interleaved pairs, a biased LM head.
// CodeGen: GPT-J's math with q/k/v fused into qkv_proj as saved from 4
// model-parallel shards, each [queries; values; keys] of 2 of the 8 heads.
TEST(ConvertFamilies, GptJAndCodeGen) {
  SKIP_WITHOUT_PYTHON();
  for (const std::string model_type : {"gptj", "codegen"}) {
    SCOPED_TRACE(model_type);
    const std::string fixture = R"PY(
C, L, H, R, F4 = 32, 2, 8, 2, 64
D = C // H
sd = {"transformer.wte.weight": rnd(V, C, scale=0.1), "lm_head.weight": rnd(V, C, scale=0.1),
      "lm_head.bias": rnd(V, scale=0.1), "transformer.ln_f.weight": norm_w(C), "transformer.ln_f.bias": rnd(C, scale=0.1)}
for i in range(L):
    h = f"transformer.h.{i}."
    sd[h + "ln_1.weight"], sd[h + "ln_1.bias"] = norm_w(C), rnd(C, scale=0.1)
    for p in (["qkv_proj"] if MODEL_TYPE == "codegen" else ["q_proj", "k_proj", "v_proj"]) + ["out_proj"]:
        sd[h + "attn." + p + ".weight"] = rnd(3 * C if p == "qkv_proj" else C, C)
    sd[h + "mlp.fc_in.weight"], sd[h + "mlp.fc_in.bias"] = rnd(F4, C), rnd(F4, scale=0.1)
    sd[h + "mlp.fc_out.weight"], sd[h + "mlp.fc_out.bias"] = rnd(C, F4), rnd(C, scale=0.1)
    sd[h + "attn.bias"] = torch.tril(torch.ones(T, T)).bool().view(1, 1, T, T)   # mask buffers
    sd[h + "attn.masked_bias"] = torch.tensor(-1e9)
    HF_ONLY += [h + "attn.bias", h + "attn.masked_bias"]
x = sd["transformer.wte.weight"][ids]
for i in range(L):
    h = f"transformer.h.{i}."
    a = ln(sd, x, h + "ln_1")
    if MODEL_TYPE == "codegen":   # per shard: its queries, values, keys; the shards' heads in order
        q, v, k = lin(sd, a, h + "attn.qkv_proj").reshape(B, T, 4, 3 * C // 4).split(C // 4, -1)
        q, k, v = (t.reshape(B, T, H, D).transpose(1, 2) for t in (q, k, v))
    else:
        q, k, v = (heads(lin(sd, a, h + "attn." + p), H) for p in ["q_proj", "k_proj", "v_proj"])
    att = lin(sd, attend(rope(q, R, 10000.0, True), rope(k, R, 10000.0, True), v, 1 / math.sqrt(D)), h + "attn.out_proj")
    x = x + att + lin(sd, F.gelu(lin(sd, a, h + "mlp.fc_in"), approximate="tanh"), h + "mlp.fc_out")
logits = lin(sd, ln(sd, x, "transformer.ln_f"), "lm_head")
finish(sd, {"model_type": MODEL_TYPE, "vocab_size": V, "n_embd": C, "n_layer": L, "n_head": H, "n_inner": F4,
            "n_positions": T, "rotary_dim": R, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
            "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "tie_word_embeddings": False}, logits, ids)
)PY";
    expect_converts(model_type, "MODEL_TYPE = \"" + model_type + "\"\n" + fixture, [&](const TempDir& dir) {
      auto c = read_json(dir / "back/config.json");
      EXPECT_EQ(c["model_type"], model_type);
      EXPECT_EQ(c["architectures"][0], model_type == "codegen" ? "CodeGenForCausalLM" : "GPTJForCausalLM");
      EXPECT_EQ(c["rotary_dim"], 2);
      expect_config_refused(dir, [](nlohmann::json& c) { c["rotary_dim"] = nullptr; }, {"rotary_dim = null"});
    });
  }
}

// The Falcon fixture: FALCON_NEW false is Falcon 7B (one key/value head,
// one norm, tied head, no biases); true the new decoder architecture
// (key/value groups, ln_attn and ln_mlp, biases, untied head).
const char* kPyFalcon = R"PY(
C, L, H, F4, theta = 32, 2, 4, 64, 500.0
D, G = C // H, (2 if FALCON_NEW else 1)
sd = {"transformer.word_embeddings.weight": rnd(V, C, scale=0.1), "transformer.ln_f.weight": norm_w(C),
      "transformer.ln_f.bias": rnd(C, scale=0.1)}
if FALCON_NEW:
    sd["lm_head.weight"] = rnd(V, C, scale=0.1)
for i in range(L):
    h = f"transformer.h.{i}."
    for n in (["ln_attn", "ln_mlp"] if FALCON_NEW else ["input_layernorm"]):
        sd[h + n + ".weight"], sd[h + n + ".bias"] = norm_w(C), rnd(C, scale=0.1)
    for n, o, i_ in [("self_attention.query_key_value", (H + 2 * G) * D, C), ("self_attention.dense", C, C),
                     ("mlp.dense_h_to_4h", F4, C), ("mlp.dense_4h_to_h", C, F4)]:
        sd[h + n + ".weight"] = rnd(o, i_)
        if FALCON_NEW:
            sd[h + n + ".bias"] = rnd(o, scale=0.1)
x = sd["transformer.word_embeddings.weight"][ids]
for i in range(L):
    h = f"transformer.h.{i}."
    a = ln(sd, x, h + ("ln_attn" if FALCON_NEW else "input_layernorm"))
    m_in = ln(sd, x, h + "ln_mlp") if FALCON_NEW else a
    qkv = lin(sd, a, h + "self_attention.query_key_value").view(B, T, G, H // G + 2, D)   # per group [queries; k; v]
    q = qkv[:, :, :, :-2].reshape(B, T, H, D).transpose(1, 2)
    k, v = qkv[:, :, :, -2].transpose(1, 2), qkv[:, :, :, -1].transpose(1, 2)
    att = attend(rope(q, D, theta, False), rope(k, D, theta, False), v, 1 / math.sqrt(D))
    x = x + lin(sd, att, h + "self_attention.dense") + lin(sd, F.gelu(lin(sd, m_in, h + "mlp.dense_h_to_4h")), h + "mlp.dense_4h_to_h")
x = ln(sd, x, "transformer.ln_f")
logits = lin(sd, x, "lm_head") if FALCON_NEW else x @ sd["transformer.word_embeddings.weight"].t()
finish(sd, {"model_type": "falcon", "vocab_size": V, "hidden_size": C, "num_hidden_layers": L, "num_attention_heads": H,
            "num_kv_heads": G, "new_decoder_architecture": FALCON_NEW, "multi_query": not FALCON_NEW,
            "parallel_attn": True, "bias": FALCON_NEW, "alibi": False, "layer_norm_epsilon": 1e-5, "rope_theta": theta,
            "ffn_hidden_size": F4, "max_position_embeddings": T, "tie_word_embeddings": not FALCON_NEW}, logits, ids)
)PY";

TEST(ConvertFamilies, Falcon7BMultiQuery) {
  SKIP_WITHOUT_PYTHON();
  expect_converts("falcon", std::string("FALCON_NEW = False\n") + kPyFalcon, [](const TempDir& dir) {
    auto c = read_json(dir / "back/config.json");
    EXPECT_EQ(c["multi_query"], true);
    EXPECT_EQ(c["new_decoder_architecture"], false);
    EXPECT_EQ(c["rope_theta"], 500.0);
    auto p = YAML::LoadFile(dir / "zoo/params.yaml");
    EXPECT_EQ(p["model"]["extra_attention_params"]["num_kv_groups"].as<int>(), 1);
    EXPECT_FALSE(p["model"]["use_untied_layer_norm"].as<bool>());
    expect_config_refused(dir, [](nlohmann::json& c) { c["alibi"] = true; }, {"config.json: alibi = true"});
    // Falcon ships bfloat16 weights: they become the model's float32, value for value.
    auto weights = convert::read_safetensors(dir / "hf/model.safetensors");
    for (auto& [k, t] : weights) t = t.to(torch::kBFloat16);
    std::filesystem::create_directories(dir / "hf16");
    convert::write_safetensors(dir / "hf16/model.safetensors", weights);
    std::filesystem::copy_file(dir / "hf/config.json", dir / "hf16/config.json");
    convert::run_convert({dir / "hf16", "", "hf", "zoo", std::nullopt, dir / "zoo16"});
    auto saved = ckpt::load_checkpoint_file(dir / "zoo16/checkpoint_0.mdl").at("model").toGenericDict();
    torch::Tensor wte = saved.at("model.embedding_layer.word_embeddings.weight").toTensor();
    EXPECT_EQ(wte.scalar_type(), torch::kFloat);
    EXPECT_TRUE(torch::equal(wte, weights.at("transformer.word_embeddings.weight").to(torch::kFloat)));
    expect_config_refused(dir, [](nlohmann::json& c) { c["parallel_attn"] = false; }, {"parallel_attn = false"});
  });
}

TEST(ConvertFamilies, FalconNewDecoderArchitecture) {
  SKIP_WITHOUT_PYTHON();
  expect_converts("falcon", std::string("FALCON_NEW = True\n") + kPyFalcon, [](const TempDir& dir) {
    auto c = read_json(dir / "back/config.json");
    EXPECT_EQ(c["new_decoder_architecture"], true);
    EXPECT_EQ(c["num_kv_heads"], 2);
    EXPECT_EQ(c["bias"], true);
    // Falcon 40B's original config.json: model_type RefinedWeb, n_head_kv, no new_decoder_architecture.
    nlohmann::json old{{"model_type", "RefinedWeb"}, {"vocab_size", 50}, {"n_embed", 32}, {"n_layer", 2}, {"n_head", 4},
                       {"n_head_kv", 2}, {"bias", true}, {"parallel_attn", true}, {"ffn_hidden_size", 64}};
    YAML::Node m = models::find_hf_converter(models::hf_converter_for(old)).config_from_hf(old);
    EXPECT_TRUE(m["use_untied_layer_norm"].as<bool>());
    EXPECT_EQ(m["extra_attention_params"]["num_kv_groups"].as<int>(), 2);
  });
}

// BLOOM: a norm after the embeddings, ALiBi for 6 heads (not a power of
// two), query_key_value per head, tanh GELU; saved as a base model (no
// "transformer." prefix), as bloom-560m is.
TEST(ConvertFamilies, BloomWithSixHeadsAndBaseModelKeys) {
  SKIP_WITHOUT_PYTHON();
  expect_converts("bloom", R"PY(
C, L, H = 48, 2, 6
D = C // H
sd = {"word_embeddings.weight": rnd(V, C, scale=0.1), "word_embeddings_layernorm.weight": norm_w(C),
      "word_embeddings_layernorm.bias": rnd(C, scale=0.1), "ln_f.weight": norm_w(C), "ln_f.bias": rnd(C, scale=0.1)}
for i in range(L):
    h = f"h.{i}."
    for n in ["input_layernorm", "post_attention_layernorm"]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = norm_w(C), rnd(C, scale=0.1)
    for n, o, i_ in [("self_attention.query_key_value", 3 * C, C), ("self_attention.dense", C, C),
                     ("mlp.dense_h_to_4h", 4 * C, C), ("mlp.dense_4h_to_h", C, 4 * C)]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = rnd(o, i_), rnd(o, scale=0.1)
bloom_gelu = lambda x: x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))
x = ln(sd, sd["word_embeddings.weight"][ids], "word_embeddings_layernorm")
for i in range(L):
    h = f"h.{i}."
    qkv = lin(sd, ln(sd, x, h + "input_layernorm"), h + "self_attention.query_key_value").view(B, T, H, 3, D)
    q, k, v = (qkv[..., j, :].transpose(1, 2) for j in range(3))
    x = x + lin(sd, attend(q, k, v, 1 / math.sqrt(D), alibi_slopes(H)), h + "self_attention.dense")
    m = ln(sd, x, h + "post_attention_layernorm")
    x = x + lin(sd, bloom_gelu(lin(sd, m, h + "mlp.dense_h_to_4h")), h + "mlp.dense_4h_to_h")
logits = ln(sd, x, "ln_f") @ sd["word_embeddings.weight"].t()
finish(sd, {"model_type": "bloom", "vocab_size": V, "hidden_size": C, "n_layer": L, "n_head": H,
            "layer_norm_epsilon": 1e-5, "apply_residual_connection_post_layernorm": False, "hidden_dropout": 0.0,
            "attention_dropout": 0.0}, logits, ids)
)PY",
                  [](const TempDir& dir) {
                    expect_config_refused(
                        dir, [](nlohmann::json& c) { c["apply_residual_connection_post_layernorm"] = true; },
                        {"apply_residual_connection_post_layernorm = true"});
                    // A BLOOM is no MPT: the export names what MPT cannot hold, and writes nothing.
                    expect_refused([&] { convert::run_convert({dir / "zoo/checkpoint_0.mdl", "mpt", "zoo", "hf", std::nullopt, dir / "as_mpt"}); },
                                   {"model.embedding_layer_norm = true", "Hugging Face's mpt"});
                    EXPECT_FALSE(std::filesystem::exists(dir / "as_mpt/model.safetensors"));
                  });
}

// MPT: biasless LayerNorms and projections, Wqkv as [q; k; v], exact GELU,
// and MPT's own ALiBi slopes (alibi_bias_max 8) for 6 heads.
TEST(ConvertFamilies, MptWithSixHeads) {
  SKIP_WITHOUT_PYTHON();
  expect_converts("mpt", R"PY(
C, L, H, E = 48, 2, 6, 2
D = C // H
def mpt_slopes(n, bias_max=8):   # MPT's model card: the next power of two's slopes, odd ones first
    p = 2 ** math.ceil(math.log2(n))
    m = [1.0 / 2 ** (k * bias_max / p) for k in range(1, p + 1)]
    return (m[1::2] + m[0::2])[:n] if p != n else m
sd = {"transformer.wte.weight": rnd(V, C, scale=0.1), "transformer.norm_f.weight": norm_w(C)}
for i in range(L):
    h = f"transformer.blocks.{i}."
    sd[h + "norm_1.weight"], sd[h + "norm_2.weight"] = norm_w(C), norm_w(C)
    for n, o, i_ in [("attn.Wqkv", 3 * C, C), ("attn.out_proj", C, C), ("ffn.up_proj", E * C, C), ("ffn.down_proj", C, E * C)]:
        sd[h + n + ".weight"] = rnd(o, i_)
x = sd["transformer.wte.weight"][ids]
for i in range(L):
    h = f"transformer.blocks.{i}."
    q, k, v = (heads(t, H) for t in lin(sd, ln(sd, x, h + "norm_1"), h + "attn.Wqkv").chunk(3, -1))
    x = x + lin(sd, attend(q, k, v, 1 / math.sqrt(D), mpt_slopes(H)), h + "attn.out_proj")
    x = x + lin(sd, F.gelu(lin(sd, ln(sd, x, h + "norm_2"), h + "ffn.up_proj")), h + "ffn.down_proj")
logits = ln(sd, x, "transformer.norm_f") @ sd["transformer.wte.weight"].t()
finish(sd, {"model_type": "mpt", "vocab_size": V, "d_model": C, "n_heads": H, "n_layers": L, "expansion_ratio": E,
            "max_seq_len": T, "no_bias": True, "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0, "emb_pdrop": 0.0,
            "attn_config": {"alibi": True, "alibi_bias_max": 8, "attn_pdrop": 0.0, "clip_qkv": None, "qk_ln": False,
                            "softmax_scale": None}}, logits, ids)
)PY",
                  [](const TempDir& dir) {
                    // Only MPT's config.json holds this model: the export needs no --model.
                    convert::run_convert({dir / "zoo/checkpoint_0.mdl", "", "zoo", "hf", std::nullopt, dir / "auto"});
                    EXPECT_EQ(read_json(dir / "auto/config.json")["model_type"], "mpt");
                    expect_config_refused(dir, [](nlohmann::json& c) { c["attn_config"]["clip_qkv"] = 6.0; },
                                          {"config.json: attn_config.clip_qkv = 6.0"});
                    expect_config_refused(dir, [](nlohmann::json& c) { c["attn_config"]["alibi_bias_max"] = 16; },
                                          {"attn_config.alibi_bias_max = 16"});
                    expect_config_refused(dir, [](nlohmann::json& c) { c["attn_config"]["attn_type"] = "grouped_query_attention"; },
                                          {"attn_config.attn_type = \"grouped_query_attention\""});
                  });
}

// BTLM and Jais (one layout): GPT-2's Conv1D layout with SwiGLU (c_fc2 the
// gate), stored ALiBi slopes and muP (embeddings, scores / head dim, logits
// scaled).
TEST(ConvertFamilies, BtlmAndJaisWithMuP) {
  SKIP_WITHOUT_PYTHON();
  for (const std::string model_type : {"btlm", "jais"}) {
    SCOPED_TRACE(model_type);
    std::string fixture = R"PY(
C, L, H, F3 = 32, 2, 4, 48
D = C // H
sd = {"transformer.wte.weight": rnd(V, C, scale=0.1), "transformer.ln_f.weight": norm_w(C),
      "transformer.ln_f.bias": rnd(C, scale=0.1), "transformer.relative_pe.slopes": torch.tensor(alibi_slopes(H)).unsqueeze(-1)}
for i in range(L):
    h = f"transformer.h.{i}."
    for n in ["ln_1", "ln_2"]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = norm_w(C), rnd(C, scale=0.1)
    for n, i_, o in [("attn.c_attn", C, 3 * C), ("attn.c_proj", C, C), ("mlp.c_fc", C, F3), ("mlp.c_fc2", C, F3),
                     ("mlp.c_proj", F3, C)]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = rnd(i_, o), rnd(o, scale=0.1)
x = sd["transformer.wte.weight"][ids] * 3.0
slopes = sd["transformer.relative_pe.slopes"].view(-1).tolist()
for i in range(L):
    h = f"transformer.h.{i}."
    q, k, v = (heads(t, H) for t in lin(sd, ln(sd, x, h + "ln_1"), h + "attn.c_attn", True).split(C, -1))
    x = x + lin(sd, attend(q, k, v, 1.0 / D, slopes), h + "attn.c_proj", True)
    m = ln(sd, x, h + "ln_2")
    x = x + lin(sd, lin(sd, m, h + "mlp.c_fc", True) * F.silu(lin(sd, m, h + "mlp.c_fc2", True)), h + "mlp.c_proj", True)
logits = ln(sd, x, "transformer.ln_f") @ sd["transformer.wte.weight"].t() * (1.5 * 0.5)
finish(sd, {"model_type": MODEL_TYPE, "vocab_size": V, "n_embd": C, "n_layer": L, "n_head": H, "n_inner": F3,
            "n_positions": T, "activation_function": "swiglu", "position_embedding_type": "alibi",
            "mup_width_scale": 0.5, "mup_embeddings_scale": 3.0, "mup_output_alpha": 1.5, "mup_scale_qk_dot_by_d": True,
            "scale_attn_weights": True, "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
            "attn_pdrop": 0.0, "alibi_scaling": None}, logits, ids)
)PY";
    expect_converts(model_type, "MODEL_TYPE = \"" + model_type + "\"\n" + fixture,
                    [&](const TempDir& dir) {
                      auto p = YAML::LoadFile(dir / "zoo/params.yaml");
                      EXPECT_EQ(p["optimizer"]["adjust_learning_rate"]["decoder_kernel"].as<double>(), 0.5);
                      EXPECT_EQ(p["model"]["output_logits_scale"].as<double>(), 0.75);
                      auto c = read_json(dir / "back/config.json");
                      EXPECT_EQ(c["mup_output_alpha"].get<double>() * c["mup_width_scale"].get<double>(), 0.75);
                      EXPECT_EQ(c["mup_embeddings_scale"], 3.0);
                      expect_config_refused(dir, [](nlohmann::json& c) { c["alibi_scaling"] = {{"type", "linear"}, {"factor", 2}}; },
                                            {"alibi_scaling"});
                      EXPECT_EQ(c["model_type"], model_type);
                      EXPECT_EQ(c["architectures"][0], model_type == "jais" ? "JAISLMHeadModel" : "BTLMLMHeadModel");
                    });
  }
}

// SantaCoder (BigCode's remote-code GPT-2, model_type gpt2): Conv1D q_attn
// and a fused [k; v] kv_attn for one key/value head, scores also divided by
// the layer's index + 1.
TEST(ConvertFamilies, SantaCoderMultiQuery) {
  SKIP_WITHOUT_PYTHON();
  expect_converts("santacoder", R"PY(
C, L, H = 32, 2, 4
D = C // H
sd = {"transformer.wte.weight": rnd(V, C, scale=0.1), "transformer.wpe.weight": rnd(T, C, scale=0.1),
      "transformer.ln_f.weight": norm_w(C), "transformer.ln_f.bias": rnd(C, scale=0.1)}
for i in range(L):
    h = f"transformer.h.{i}."
    for n in ["ln_1", "ln_2"]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = norm_w(C), rnd(C, scale=0.1)
    for n, i_, o in [("attn.q_attn", C, C), ("attn.kv_attn", C, 2 * D), ("attn.c_proj", C, C), ("mlp.c_fc", C, 4 * C),
                     ("mlp.c_proj", 4 * C, C)]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = rnd(i_, o), rnd(o, scale=0.1)
    sd[h + "attn.masked_bias"] = torch.tensor(-1e4)
    HF_ONLY.append(h + "attn.masked_bias")
x = sd["transformer.wte.weight"][ids] + sd["transformer.wpe.weight"][:T]
for i in range(L):
    h = f"transformer.h.{i}."
    a = ln(sd, x, h + "ln_1")
    k, v = (heads(t, 1) for t in lin(sd, a, h + "attn.kv_attn", True).split(D, -1))
    att = attend(heads(lin(sd, a, h + "attn.q_attn", True), H), k, v, 1 / math.sqrt(D) / (i + 1))
    x = x + lin(sd, att, h + "attn.c_proj", True)
    x = x + lin(sd, F.gelu(lin(sd, ln(sd, x, h + "ln_2"), h + "mlp.c_fc", True), approximate="tanh"), h + "mlp.c_proj", True)
logits = ln(sd, x, "transformer.ln_f") @ sd["transformer.wte.weight"].t()
finish(sd, {"model_type": "gpt2", "attention_head_type": "multiquery", "vocab_size": V, "n_embd": C, "n_layer": L,
            "auto_map": {"AutoConfig": "configuration_gpt2_mq.GPT2CustomConfig",
                         "AutoModelForCausalLM": "modeling_gpt2_mq.GPT2LMHeadCustomModel"},
            "n_head": H, "n_inner": None, "n_positions": T, "activation_function": "gelu_fast",
            "scale_attn_by_inverse_layer_idx": True, "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
            "attn_pdrop": 0.0}, logits, ids)
)PY",
                  [](const TempDir& dir) {
                    auto c = read_json(dir / "back/config.json");
                    EXPECT_EQ(c["attention_head_type"], "multiquery");
                    EXPECT_EQ(c["scale_attn_by_inverse_layer_idx"], true);
                    // Plain GPT-2 has no multi-query attention: refused by name.
                    expect_refused([&] { convert::run_convert({dir / "zoo/checkpoint_0.mdl", "gpt2", "zoo", "hf", std::nullopt, dir / "g"}); },
                                   {"model.attention_module = multiquery_attention", "--model santacoder or starcoder"});
                  });
}

// StarCoder (transformers' GPTBigCode): nn.Linear weights, c_attn per key/value
// group: [q; k; v] with one key/value head, or per head [q_h; k_h; v_h].
const char* kPyStarcoder = R"PY(
C, L, H = 32, 2, 4
D = C // H
G = 1 if MULTI_QUERY else H
sd = {"transformer.wte.weight": rnd(V, C, scale=0.1), "transformer.wpe.weight": rnd(T, C, scale=0.1),
      "transformer.ln_f.weight": norm_w(C), "transformer.ln_f.bias": rnd(C, scale=0.1)}
for i in range(L):
    h = f"transformer.h.{i}."
    for n in ["ln_1", "ln_2"]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = norm_w(C), rnd(C, scale=0.1)
    for n, o, i_ in [("attn.c_attn", C + 2 * G * D, C), ("attn.c_proj", C, C), ("mlp.c_fc", 4 * C, C), ("mlp.c_proj", C, 4 * C)]:
        sd[h + n + ".weight"], sd[h + n + ".bias"] = rnd(o, i_), rnd(o, scale=0.1)
x = sd["transformer.wte.weight"][ids] + sd["transformer.wpe.weight"][:T]
for i in range(L):
    h = f"transformer.h.{i}."
    qkv = lin(sd, ln(sd, x, h + "ln_1"), h + "attn.c_attn")
    if MULTI_QUERY:
        q, k, v = qkv.split([C, D, D], -1)
        q, k, v = heads(q, H), heads(k, 1), heads(v, 1)
    else:
        per_head = qkv.view(B, T, H, 3 * D).transpose(1, 2)
        q, k, v = per_head[..., :D], per_head[..., D:2 * D], per_head[..., 2 * D:]
    x = x + lin(sd, attend(q, k, v, 1 / math.sqrt(D)), h + "attn.c_proj")
    x = x + lin(sd, F.gelu(lin(sd, ln(sd, x, h + "ln_2"), h + "mlp.c_fc"), approximate="tanh"), h + "mlp.c_proj")
logits = ln(sd, x, "transformer.ln_f") @ sd["transformer.wte.weight"].t()
finish(sd, {"model_type": "gpt_bigcode", "multi_query": MULTI_QUERY, "vocab_size": V, "n_embd": C, "n_layer": L,
            "n_head": H, "n_inner": None, "n_positions": T, "activation_function": "gelu_pytorch_tanh",
            "scale_attn_weights": True, "attention_softmax_in_fp32": True, "scale_attention_softmax_in_fp32": True,
            "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}, logits, ids)
)PY";

TEST(ConvertFamilies, StarCoderMultiQuery) {
  SKIP_WITHOUT_PYTHON();
  expect_converts("starcoder", std::string("MULTI_QUERY = True\n") + kPyStarcoder, [](const TempDir& dir) {
    EXPECT_EQ(read_json(dir / "back/config.json")["multi_query"], true);
    // SantaCoder's and StarCoder's layouts both hold a multi-query GPT-2: the export asks which.
    expect_refused([&] { convert::run_convert({dir / "zoo/checkpoint_0.mdl", "", "zoo", "hf", std::nullopt, dir / "a"}); },
                   {"pass --model", "the model exports as santacoder, starcoder"});
  });
}

TEST(ConvertFamilies, StarCoderMultiHead) {
  SKIP_WITHOUT_PYTHON();
  expect_converts("starcoder", std::string("MULTI_QUERY = False\n") + kPyStarcoder, [](const TempDir& dir) {
    EXPECT_EQ(read_json(dir / "back/config.json")["multi_query"], false);
  });
}
