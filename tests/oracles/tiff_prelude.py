import struct, sys, os
import numpy as np
def write_tiff(path, arr, big=False, rows_per_strip=3, photometric=None, compression=1):
    if arr.ndim == 2: arr = arr[:, :, None]
    H, W, C = arr.shape
    e = '>' if big else '<'
    data = np.ascontiguousarray(arr, dtype=np.uint8).tobytes()
    strips = [data[r * W * C:(r + rows_per_strip) * W * C] for r in range(0, H, rows_per_strip)]
    body, pos, offsets = b'', 8, []
    for s in strips:
        offsets.append(pos); body += s; pos += len(s)
    def put(fmt, values):
        nonlocal body, pos
        at = pos; b = struct.pack(e + fmt * len(values), *values); body += b; pos += len(b)
        if pos % 2: body += b'\0'; pos += 1
        return at
    bits_at = put('H', [8] * C) if C > 2 else None
    off_at = put('I', offsets) if len(strips) > 1 else None
    cnt_at = put('I', [len(s) for s in strips]) if len(strips) > 1 else None
    ph = photometric if photometric is not None else (2 if C >= 3 else 1)
    def short(v): return struct.pack(e + 'HH', v, 0)
    def long_(v): return struct.pack(e + 'I', v)
    entries = [(256, 3, 1, short(W)), (257, 3, 1, short(H)),
               (258, 3, C, long_(bits_at) if C > 2 else short(8)), (259, 3, 1, short(compression)),
               (262, 3, 1, short(ph)),
               (273, 4, len(strips), long_(off_at) if off_at else long_(offsets[0])),
               (277, 3, 1, short(C)), (278, 3, 1, short(rows_per_strip)),
               (279, 4, len(strips), long_(cnt_at) if cnt_at else long_(len(strips[0])))]
    if C == 4: entries.append((338, 3, 1, short(2)))  # ExtraSamples: unassociated alpha
    ifd = struct.pack(e + 'H', len(entries)) + b''.join(struct.pack(e + 'HHI', t, ty, n) + v for t, ty, n, v in entries) + struct.pack(e + 'I', 0)
    with open(path, 'wb') as f:
        f.write((b'MM' if big else b'II') + struct.pack(e + 'HI', 42, pos) + body + ifd)
