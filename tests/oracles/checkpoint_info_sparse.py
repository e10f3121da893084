# Writes a zoo checkpoint shaped as Cerebras-GPT 13B (hidden 5120, 40 layers, vocab 50257): torch.save's zip layout
# with each tensor's record left as a hole in a sparse file, so ~52 GB of float32 take no disk and no time.
# The pickle is torch's own (torch._utils._rebuild_tensor_v2 over persistent storage ids); the zip is written here
# (zip64: records past 4 GB), stored uncompressed and each record's data aligned to 64 bytes as PyTorch's writer
# aligns it. Usage: checkpoint_info_sparse.py OUT.mdl; prints {"tensors": n, "elements": n} as JSON.
import collections, io, json, pickle, struct, sys, zlib
import torch

H, L, V, F, T = 5120, 40, 50257, 20480, 2048
shapes = {"model.embedding_layer.word_embeddings.weight": (V, H),
          "model.embedding_layer.position_embeddings.weight": (T, H)}
for i in range(L):
    p = f"model.transformer_decoder.layers.{i}."
    for proj in ("proj_q_dense_layer", "proj_k_dense_layer", "proj_v_dense_layer", "proj_output_dense_layer"):
        shapes[p + f"self_attn.{proj}.weight"] = (H, H)
        shapes[p + f"self_attn.{proj}.bias"] = (H,)
    for norm in ("norm1", "norm3"):
        shapes[p + f"{norm}.weight"] = (H,)
        shapes[p + f"{norm}.bias"] = (H,)
    shapes[p + "ffn.ffn.0.linear_layer.weight"] = (F, H)
    shapes[p + "ffn.ffn.0.linear_layer.bias"] = (F,)
    shapes[p + "ffn.ffn.1.linear_layer.weight"] = (H, F)
    shapes[p + "ffn.ffn.1.linear_layer.bias"] = (H,)
shapes["model.transformer_decoder.norm.weight"] = (H,)
shapes["model.transformer_decoder.norm.bias"] = (H,)

class Storage:
    def __init__(self, key, numel): self.key, self.numel = key, numel

class Tensor:
    def __init__(self, key, shape): self.key, self.shape = key, shape
    def __reduce__(self):
        numel, stride = 1, []
        for d in reversed(self.shape):
            stride.insert(0, numel)
            numel *= d
        return (torch._utils._rebuild_tensor_v2,
                (Storage(self.key, numel), 0, tuple(self.shape), tuple(stride), False, collections.OrderedDict()))

class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        return ("storage", torch.FloatStorage, obj.key, "cpu", obj.numel) if isinstance(obj, Storage) else None

params = ("model:\n  hidden_size: %d\n  num_hidden_layers: %d\n  num_heads: 40\n  vocab_size: %d\n  filter_size: %d\n"
          "  max_position_embeddings: %d\noptimizer:\n  optimizer_type: AdamW\n" % (H, L, V, F, T))
model = {name: Tensor(str(i), shape) for i, (name, shape) in enumerate(shapes.items())}
meta = {"version": "zoo (sparse fixture)", "model_name": "gpt2", "params": params}
# Two entries: Python pickles a one-item list with APPEND, which LibTorch 1.13's unpickler does not know (zoo's own
# writer, LibTorch's pickler, always uses APPENDS), nor SETITEM for a one-item dict; zoo reads the first.
checkpoint = {"model": model, "global_step": 0, "__checksum__": 0, "__metadata__": [meta, {"note": "second entry", "of": "two"}]}
buf = io.BytesIO()
Pickler(buf, protocol=2).dump(checkpoint)

records = [("data.pkl", buf.getvalue())]
records += [(f"data/{i}", 4 * int(torch.Size(shape).numel())) for i, shape in enumerate(shapes.values())]
records += [("version", b"3\n")]
out = open(sys.argv[1], "wb")
central = []
for name, data in records:
    full = ("archive/" + name).encode()
    size = data if isinstance(data, int) else len(data)
    crc = 0 if isinstance(data, int) else zlib.crc32(data)
    offset = out.tell()
    zip64 = struct.pack("<HHQQ", 1, 16, size, size)
    pad = (-(offset + 30 + len(full) + len(zip64) + 4)) % 64
    extra = zip64 + struct.pack("<HH", 0x4246, pad) + b"Z" * pad
    out.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(full),
                          len(extra)) + full + extra)
    if isinstance(data, int):
        out.seek(size, 1)  # a hole: the file system stores nothing
    else:
        out.write(data)
    central.append((full, crc, size, offset))
cd_offset = out.tell()
for full, crc, size, offset in central:
    extra = struct.pack("<HHQQQ", 1, 24, size, size, offset)
    out.write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                          len(full), len(extra), 0, 0, 0, 0, 0xFFFFFFFF) + full + extra)
cd_size = out.tell() - cd_offset
eocd64 = out.tell()
n = len(central)
out.write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, cd_size, cd_offset))
out.write(struct.pack("<IIQI", 0x07064B50, 0, eocd64, 1))
out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0))
out.close()
print(json.dumps({"tensors": len(shapes), "elements": sum(int(torch.Size(s).numel()) for s in shapes.values())}))
