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
