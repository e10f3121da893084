// zoo convert for T5: Python writes a tiny random checkpoint in Hugging
// Face's T5ForConditionalGeneration layout with the logits of T5's forward
// pass written here from the paper and HF's published code (transformers
// cannot be installed here). zoo must convert it, give those logits to 1e-5
// on a padded batch, and convert back to the same tensors bit for bit; what
// HF's T5 cannot hold must be refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "convert_fixtures.h"
#include "models/t5/t5.h"
#include "runner/convert/convert.h"
#include "runner/convert/safetensors.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

// argv: dir, then "v1" (ReLU, embeddings tied to the head, which scales by
// d_model^-1/2), "glu" (gated-silu, an untied lm_head: T5 v1.1's layout) or
// "flan" (the same with gated-gelu, GELU's tanh form gating: FLAN-T5's).
const char* kPyT5 = R"PY(
import math, os, sys
import torch.nn.functional as F
out, kind = sys.argv[1], sys.argv[2]
glu = kind in ("glu", "flan")
gate = (lambda x: F.gelu(x, approximate="tanh")) if kind == "flan" else F.silu
torch.manual_seed(0)
B, S, T, V, C, D, H, FF, L, LD, NB, EPS = 2, 7, 5, 40, 16, 4, 3, 24, 2, 3, 8, 1e-6

def rnd(*shape):
    return torch.randn(*shape) * 0.3

sd = {"shared.weight": rnd(V, C)}
sd["encoder.embed_tokens.weight"] = sd["decoder.embed_tokens.weight"] = sd["shared.weight"]  # tied copies
def attention_weights(p):
    for n in "qkv":
        sd[p + "." + n + ".weight"] = rnd(H * D, C)
    sd[p + ".o.weight"] = rnd(C, H * D)
def ffn_weights(p):
    for n in (["wi_0", "wi_1"] if glu else ["wi"]):
        sd[p + "." + n + ".weight"] = rnd(FF, C)
    sd[p + ".wo.weight"] = rnd(C, FF)
def norm_weight(p):
    sd[p + ".weight"] = 1 + rnd(C)
for stack, layers in (("encoder", L), ("decoder", LD)):
    sd[stack + ".block.0.layer.0.SelfAttention.relative_attention_bias.weight"] = rnd(NB, H)
    for i in range(layers):
        p = "%s.block.%d.layer." % (stack, i)
        attention_weights(p + "0.SelfAttention")
        norm_weight(p + "0.layer_norm")
        f = p + "1"
        if stack == "decoder":
            attention_weights(p + "1.EncDecAttention")
            norm_weight(p + "1.layer_norm")
            f = p + "2"
        ffn_weights(f + ".DenseReluDense")
        norm_weight(f + ".layer_norm")
    norm_weight(stack + ".final_layer_norm")
if glu:
    sd["lm_head.weight"] = rnd(V, C)

def rms(x, name):  # T5LayerNorm: no mean, no bias
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * sd[name + ".weight"]

def bucket(rel, bidirectional, buckets=NB, max_distance=128):
    ret = torch.zeros_like(rel)
    if bidirectional:
        buckets //= 2
        ret = ret + (rel > 0).long() * buckets
        n = rel.abs()
    else:
        n = -torch.clamp(rel, max=0)
    exact = buckets // 2
    large = exact + (torch.log(n.float() / exact) / math.log(max_distance / exact) * (buckets - exact)).long()
    large = torch.clamp(large, max=buckets - 1)
    return ret + torch.where(n < exact, n, large)

def position_bias(stack, q, k, bidirectional):
    rel = torch.arange(k)[None, :] - torch.arange(q)[:, None]
    return sd[stack + ".block.0.layer.0.SelfAttention.relative_attention_bias.weight"][bucket(rel, bidirectional)] \
        .permute(2, 0, 1)[None]

def attention(x, kv, p, add):  # T5 does not scale the scores
    heads = lambda t: t.view(B, -1, H, D).transpose(1, 2)
    q, k, v = heads(x @ sd[p + ".q.weight"].t()), heads(kv @ sd[p + ".k.weight"].t()), heads(kv @ sd[p + ".v.weight"].t())
    a = ((q @ k.transpose(-1, -2) + add).softmax(-1) @ v).transpose(1, 2).reshape(B, -1, H * D)
    return a @ sd[p + ".o.weight"].t()

def ffn(x, p):
    if glu:
        return (gate(x @ sd[p + ".wi_0.weight"].t()) * (x @ sd[p + ".wi_1.weight"].t())) @ sd[p + ".wo.weight"].t()
    return F.relu(x @ sd[p + ".wi.weight"].t()) @ sd[p + ".wo.weight"].t()

src, tgt = torch.randint(0, V, (B, S)), torch.randint(0, V, (B, T))
mask = torch.ones(B, S)
mask[1, 5:] = 0
padding = (1 - mask)[:, None, None, :] * -1e9
h = sd["shared.weight"][src]
enc_bias = position_bias("encoder", S, S, True) + padding
for i in range(L):
    p = "encoder.block.%d.layer." % i
    h = h + attention(rms(h, p + "0.layer_norm"), rms(h, p + "0.layer_norm"), p + "0.SelfAttention", enc_bias)
    h = h + ffn(rms(h, p + "1.layer_norm"), p + "1.DenseReluDense")
h = rms(h, "encoder.final_layer_norm")
d = sd["shared.weight"][tgt]
dec_bias = position_bias("decoder", T, T, False) + torch.triu(torch.full((T, T), -1e9), 1)
for i in range(LD):
    p = "decoder.block.%d.layer." % i
    n = rms(d, p + "0.layer_norm")
    d = d + attention(n, n, p + "0.SelfAttention", dec_bias)
    d = d + attention(rms(d, p + "1.layer_norm"), h, p + "1.EncDecAttention", padding)
    d = d + ffn(rms(d, p + "2.layer_norm"), p + "2.DenseReluDense")
d = rms(d, "decoder.final_layer_norm")
logits = d @ sd["lm_head.weight"].t() if glu else (d * C ** -0.5) @ sd["shared.weight"].t()
os.makedirs(out + "/hf", exist_ok=True)
write_safetensors(out + "/hf/model.safetensors", sd)
config = {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "vocab_size": V, "d_model": C,
          "d_kv": D, "d_ff": FF, "num_layers": L, "num_decoder_layers": LD, "num_heads": H,
          "relative_attention_num_buckets": NB, "relative_attention_max_distance": 128, "dropout_rate": 0.1,
          "layer_norm_epsilon": EPS, "initializer_factor": 1.0,
          "feed_forward_proj": {"v1": "relu", "glu": "gated-silu", "flan": "gated-gelu"}[kind], "tie_word_embeddings": not glu,
          "is_encoder_decoder": True, "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0}
json.dump(config, open(out + "/hf/config.json", "w"))
for name, t in [("src", src), ("mask", mask.long()), ("tgt", tgt), ("logits", logits)]:
    open(out + "/" + name + ".bin", "wb").write(t.detach().numpy().tobytes())
)PY";

void expect_t5_converts(const std::string& kind) {
  TempDir dir;
  const std::string script = zoo::testing::write_file(dir / "t5.py", std::string(zoo::testing::kPySafetensors) + kPyT5);
  auto r = zoo::testing::run_command(zoo::testing::fixture_python() + " " + script + " " + dir.path() + " " + kind);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  convert::run_convert({dir / "hf", "", "hf", "zoo", std::nullopt, dir / "zoo"});
  auto model = std::dynamic_pointer_cast<models::T5Model>(zoo::testing::load_converted(dir));
  ASSERT_TRUE(model);
  using zoo::testing::read_raw;
  const torch::Tensor src = read_raw(dir / "src.bin", torch::kLong, {2, 7}), mask = read_raw(dir / "mask.bin", torch::kLong, {2, 7}),
                      tgt = read_raw(dir / "tgt.bin", torch::kLong, {2, 5});
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->logits(src, mask, tgt).narrow(-1, 0, 40);
  EXPECT_LT((logits - read_raw(dir / "logits.bin", torch::kFloat, {2, 5, 40})).abs().max().item<double>(), 1e-5) << kind;
  // Fine-tuning params: T5's text processor with the checkpoint's vocabulary, its 100 sentinels, <pad> to start.
  const YAML::Node params = YAML::LoadFile(dir / "zoo/params.yaml");
  EXPECT_EQ(params["model"]["name"].as<std::string>(), "t5");
  EXPECT_EQ(params["train_input"]["data_processor"].as<std::string>(), "T5DynamicDataProcessor");
  EXPECT_EQ(params["train_input"]["src_data_dir"].as<std::string>(), "./data/train");
  EXPECT_EQ(params["eval_input"]["src_data_dir"].as<std::string>(), "./data/val");
  EXPECT_FALSE(params["train_input"]["data_dir"]);
  EXPECT_EQ(params["train_input"]["sos_token"].as<std::string>(), "<pad>");

  convert::run_convert({dir / "zoo/checkpoint_0.mdl", "t5", "zoo", "hf", std::nullopt, dir / "back"});
  auto original = convert::read_safetensors(dir / "hf/model.safetensors");
  auto back = convert::read_safetensors(dir / "back/model.safetensors");
  size_t compared = 0;
  for (const auto& [k, t] : original) {
    if (k.find("embed_tokens") != std::string::npos) continue;  // tied copies
    ASSERT_TRUE(back.count(k)) << kind << ": " << k << " did not come back";
    EXPECT_TRUE(torch::equal(t, back[k])) << kind << ": " << k;
    ++compared;
  }
  EXPECT_EQ(compared, back.size()) << kind << ": the export wrote tensors the original did not have";
  const nlohmann::json config = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(config.at("feed_forward_proj"), kind == "glu" ? "gated-silu" : kind == "flan" ? "gated-gelu" : "relu");
  EXPECT_EQ(config.at("tie_word_embeddings"), kind == "v1");
  EXPECT_EQ(config.at("scale_decoder_outputs"), kind == "v1");  // transformers 5 reads this, not the tie
  EXPECT_EQ(config.at("num_decoder_layers"), 3);
}

}  // namespace

// T5 v1.0's layout: ReLU, the head tied to the shared embeddings.
TEST(ConvertT5, TiedReluModelMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  expect_t5_converts("v1");
}

// T5 v1.1's layout with a gated FFN (gated-silu: wi_0 the gate, wi_1 the
// linear half) and an untied lm_head, more decoder layers than encoder's.
TEST(ConvertT5, GatedUntiedModelMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  expect_t5_converts("glu");
}

// FLAN-T5's layout: gated-gelu, whose gate is GELU's tanh form (zoo's
// geglu_tanh), exact both ways; modelzoo's converter maps it to geglu.
TEST(ConvertT5, FlanGatedGeluMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  expect_t5_converts("flan");
}

// What zoo's t5 cannot be and what HF's T5 cannot hold (the Transformer's keys) are refused by name.
TEST(ConvertT5, UnrepresentableOptionsAreRefused) {
  const models::HfAdapter& a = models::find_hf_converter("t5");
  nlohmann::json c{{"model_type", "t5"}, {"vocab_size", 100}, {"d_model", 16}, {"d_kv", 4}, {"d_ff", 32},
                   {"num_layers", 1}, {"num_heads", 2}, {"feed_forward_proj", "gated-tanh"}};
  zoo::testing::expect_refused([&] { a.config_from_hf(c); }, {"feed_forward_proj", "gated-gelu"});
  c["feed_forward_proj"] = "relu";
  c["relative_attention_max_distance"] = 64;
  zoo::testing::expect_refused([&] { a.config_from_hf(c); }, {"relative_attention_max_distance"});
  c.erase("relative_attention_max_distance");
  // transformers scales the decoder output by d_model^-1/2 when scale_decoder_outputs says so (by the tie when
  // the field is absent); zoo's t5 scales exactly when tied: the two agreeing convert, differing is refused.
  for (const bool tied : {true, false}) {
    c["tie_word_embeddings"] = tied;
    c["scale_decoder_outputs"] = tied;
    EXPECT_EQ(a.config_from_hf(c)["share_embedding_weights"].as<bool>(), tied);
    c["scale_decoder_outputs"] = nullptr;
    EXPECT_EQ(a.config_from_hf(c)["share_embedding_weights"].as<bool>(), tied);
    c["scale_decoder_outputs"] = !tied;
    zoo::testing::expect_refused([&] { a.config_from_hf(c); },
                                 {"config.json: scale_decoder_outputs = " + std::string(tied ? "false" : "true"),
                                  "differs from tie_word_embeddings"});
  }
  c.erase("scale_decoder_outputs");
  c.erase("tie_word_embeddings");
  YAML::Node y = YAML::Load(zoo::testing::tiny_params_yaml("/d", "/m"));
  y.remove("train_input");
  y.remove("eval_input");
  y["model"] = YAML::Load("{name: transformer, src_vocab_size: 100, d_model: 16, d_kv: 4, num_heads: 2, d_ff: 32, "
                          "encoder_num_hidden_layers: 1, norm_type: layernorm, position_embedding_type: fixed, "
                          "src_max_position_embeddings: 8, tgt_max_position_embeddings: 8}");
  Params p = params_from_node(y, "p.yaml", YAML::Node());
  zoo::testing::expect_refused([&] { a.config_to_hf(*p.model); },
                               {"model.norm_type = layernorm: Hugging Face's t5 normalizes with RMSNorm"});
}
