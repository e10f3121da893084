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
def read_safetensors(path):
    kinds = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64}
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header, body, sd = json.loads(raw[8:8 + n]), raw[8 + n:], {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        sd[k] = torch.frombuffer(bytearray(body[a:b]), dtype=kinds[v["dtype"]]).reshape(v["shape"])
    return sd
