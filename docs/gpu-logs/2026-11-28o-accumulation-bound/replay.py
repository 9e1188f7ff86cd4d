# Host replay of the fourteenth session's "open defect": the inputs `rank-check gemm-ar` made
# for seed 1795828215035809835 (splitmix64 as in host/testing.rs, `inputs` in
# host/bin/cmd_gemm_rs.rs), and element out[3168][1447] of the 1 x 2, 8192x4096x4096 KN case:
# both partials, their exact sum, the products' magnitude, an fp32 sequential accumulation.
import struct
def f32(x): return struct.unpack('f', struct.pack('f', x))[0]
def bf16(x):
    b = struct.unpack('I', struct.pack('f', x))[0]
    b = ((b + ((b >> 16) & 1) + 0x7fff) >> 16) << 16
    return struct.unpack('f', struct.pack('I', b))[0]
M64 = (1 << 64) - 1
C = 0x9e3779b97f4a7c15
def mix(z):
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
    return z ^ (z >> 31)
def val(s0, i):  # the i-th value (0-based) of Rng::new(s0).bf16_vec
    z = mix((s0 + (i + 1) * C) & M64)
    return bf16(f32(f32((z >> 40) / float(1 << 24)) * 2.0 - 1.0))
seed = 1795828215035809835
m, n, k, w = 8192, 4096, 4096, 2
kl = k // w
i, j = 3168, 1447
parts, absab, prods = [], 0.0, []
for r in range(w):
    s0 = (seed ^ (((r + 1) * C) & M64)) & M64  # round 0
    a = [val(s0, i * kl + kk) for kk in range(kl)]
    b = [val(s0, m * kl + kk * n + j) for kk in range(kl)]
    p = [x * y for x, y in zip(a, b)]
    prods.append(p); parts.append(sum(p)); absab += sum(abs(x) for x in p)
print("partials", parts, "exact", sum(parts), "sum |a b|", absab)
for r in range(w):
    acc = 0.0
    for x in prods[r]:
        acc = f32(acc + x)
    print("rank", r, "fp32 sequential", acc, "error", acc - parts[r])
# The new accumulation bound (host/ops/gemm.rs, reference_row_bounded) for each partial.
for r in range(w):
    e, acc = 0.0, 0.0
    for s in range(0, kl, 16):
        big = abs(acc)
        for x in prods[r][s:s + 16]:
            acc += x
            big = max(big, abs(x))
        e += 17 * 2.0 ** -23 * big
    print("rank", r, "accumulation bound", e)
