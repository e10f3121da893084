import struct, sys, crc32c
def masked(b):
    c = crc32c.crc32c(b)
    return (((c >> 15) | (c << 17)) + 0xa282ead8) & 0xffffffff
data, at, n = open(sys.argv[1], "rb").read(), 0, 0
while at < len(data):
    (length,) = struct.unpack("<Q", data[at:at + 8])
    assert struct.unpack("<I", data[at + 8:at + 12])[0] == masked(data[at:at + 8]), "length crc"
    payload = data[at + 12:at + 12 + length]
    assert struct.unpack("<I", data[at + 12 + length:at + 16 + length])[0] == masked(payload), "payload crc"
    at, n = at + 16 + length, n + 1
print(n)
