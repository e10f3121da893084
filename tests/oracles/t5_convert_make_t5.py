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
