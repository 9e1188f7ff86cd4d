// NVLink probe: how fast can SMs move an all-gather's bytes, against the copy engines?
// Every GPU of `world` sends its shard (S bytes) to every other GPU's output (offset r*S).
// Variants: ce (one cudaMemcpyPeerAsync per peer, each on its own stream, all at once),
// fan (each block loads a range once and stores it to every peer), split (block b serves
// peer b % peers), pull (each GPU reads every peer's shard), with `blocks` x 512 threads and
// UNROLL 16-byte loads in flight per thread (nvbandwidth's SM copy shape).
// Timing: all GPUs synchronised before each iteration, events per GPU, max over GPUs, median.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <string>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); exit(1);} } while (0)

constexpr int UNROLL = 8;
constexpr int THREADS = 512;
struct Dsts { uint4* p[8]; int n; };

// Fan: block range [lo, hi) of the shard (in uint4), each loaded once, stored to every peer.
__global__ void fan(const uint4* __restrict__ src, Dsts d, size_t n) {
  size_t per = (n + gridDim.x - 1) / gridDim.x;
  size_t lo = blockIdx.x * per, hi = min(n, lo + per);
  for (size_t base = lo + threadIdx.x; base < hi; base += (size_t)THREADS * UNROLL) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) { size_t i = base + (size_t)u * THREADS; if (i < hi) v[u] = src[i]; }
    for (int k = 0; k < d.n; k++) {
#pragma unroll
      for (int u = 0; u < UNROLL; u++) { size_t i = base + (size_t)u * THREADS; if (i < hi) d.p[k][i] = v[u]; }
    }
  }
}

// Split: block b serves peer b % peers, range (b / peers) of blocks / peers.
__global__ void split(const uint4* __restrict__ src, Dsts d, size_t n) {
  int k = blockIdx.x % d.n, nb = gridDim.x / d.n, b = blockIdx.x / d.n;
  if (b >= nb) return;
  size_t per = (n + nb - 1) / nb;
  size_t lo = b * per, hi = min(n, lo + per);
  uint4* dst = d.p[k];
  for (size_t base = lo + threadIdx.x; base < hi; base += (size_t)THREADS * UNROLL) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) { size_t i = base + (size_t)u * THREADS; if (i < hi) v[u] = src[i]; }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) { size_t i = base + (size_t)u * THREADS; if (i < hi) dst[i] = v[u]; }
  }
}

// Pull: block b reads from source b % peers (d.p = the peers' shards), into outs[b % peers].
__global__ void pull(Dsts srcs, Dsts outs, size_t n) {
  int k = blockIdx.x % srcs.n, nb = gridDim.x / srcs.n, b = blockIdx.x / srcs.n;
  if (b >= nb) return;
  size_t per = (n + nb - 1) / nb;
  size_t lo = b * per, hi = min(n, lo + per);
  const uint4* src = srcs.p[k];
  uint4* dst = outs.p[k];
  for (size_t base = lo + threadIdx.x; base < hi; base += (size_t)THREADS * UNROLL) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) { size_t i = base + (size_t)u * THREADS; if (i < hi) v[u] = src[i]; }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) { size_t i = base + (size_t)u * THREADS; if (i < hi) dst[i] = v[u]; }
  }
}


// TMA fan: one thread per block, 12 stages x 16 KiB, loads 6 ahead, each stage stored to every
// peer by cp.async.bulk (our all-gather's BulkRing in miniature).
constexpr int CH = 16384, ST = 12, AH = 6;
__device__ __forceinline__ unsigned sa(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__global__ void tma_fan(const char* __restrict__ src, Dsts d, size_t bytes) {
  extern __shared__ __align__(128) char sm[];
  unsigned long long* bar = (unsigned long long*)(sm + ST * CH);
  if (threadIdx.x != 0) return;
  for (int s = 0; s < ST; s++) asm volatile("mbarrier.init.shared.b64 [%0], 1;" :: "r"(sa(&bar[s])));
  asm volatile("fence.mbarrier_init.release.cluster;");
  size_t per = (bytes + gridDim.x - 1) / gridDim.x; per = (per + CH - 1) / CH * CH;
  size_t lo = blockIdx.x * per, hi = min(bytes, lo + per);
  if (lo >= hi) return;
  int cnt = (int)((hi - lo + CH - 1) / CH);
  auto load = [&](int i) {
    int s = i % ST; unsigned len = (unsigned)min((size_t)CH, hi - lo - (size_t)i * CH);
    asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" :: "r"(sa(&bar[s])), "r"(len));
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(sa(sm + s * CH)), "l"(src + lo + (size_t)i * CH), "r"(len), "r"(sa(&bar[s])) : "memory");
  };
  int loaded = 0;
  for (; loaded < min(cnt, AH); loaded++) load(loaded);
  for (int i = 0; i < cnt; i++) {
    int s = i % ST; unsigned par = (i / ST) & 1;
    asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared.b64 p, [%0], %1; @!p bra W; }" :: "r"(sa(&bar[s])), "r"(par) : "memory");
    unsigned len = (unsigned)min((size_t)CH, hi - lo - (size_t)i * CH);
    for (int k = 0; k < d.n; k++)
      asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"((char*)d.p[k] + lo + (size_t)i * CH), "r"(sa(sm + s * CH)), "r"(len) : "memory");
    asm volatile("cp.async.bulk.commit_group;");
    if (loaded < cnt) { asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(ST - AH) : "memory"); load(loaded++); }
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

int main(int argc, char** argv) {
  int world = argc > 1 ? atoi(argv[1]) : 4;
  size_t S = (argc > 2 ? strtoull(argv[2], 0, 10) : 64) << 20;  // shard MiB
  std::string only = argc > 3 ? argv[3] : "";
  int reps = 20;
  size_t n = S / 16;
  std::vector<uint4*> in(world), out(world);
  std::vector<cudaStream_t> st(world * 8);
  std::vector<cudaEvent_t> e0(world), e1(world);
  for (int g = 0; g < world; g++) {
    CK(cudaSetDevice(g));
    for (int h = 0; h < world; h++) if (h != g) CK(cudaDeviceEnablePeerAccess(h, 0));
    CK(cudaMalloc(&in[g], S));
    CK(cudaMalloc(&out[g], S * world));
    CK(cudaMemset(in[g], g + 1, S));
    for (int s = 0; s < 8; s++) CK(cudaStreamCreateWithFlags(&st[g * 8 + s], cudaStreamNonBlocking));
    CK(cudaEventCreate(&e0[g])); CK(cudaEventCreate(&e1[g]));
  }
  auto all_sync = [&] { for (int g = 0; g < world; g++) { CK(cudaSetDevice(g)); CK(cudaDeviceSynchronize()); } };
  auto time = [&](const char* name, auto&& launch) {
    if (!only.empty() && only != name && only.find(name) == std::string::npos) {}
    std::vector<float> t;
    for (int it = 0; it < reps + 3; it++) {
      all_sync();
      for (int g = 0; g < world; g++) { CK(cudaSetDevice(g)); CK(cudaEventRecord(e0[g], st[g * 8])); }
      for (int g = 0; g < world; g++) { CK(cudaSetDevice(g)); launch(g); }
      for (int g = 0; g < world; g++) { CK(cudaSetDevice(g)); CK(cudaEventRecord(e1[g], st[g * 8])); }
      all_sync();
      float mx = 0;
      for (int g = 0; g < world; g++) { float ms; CK(cudaEventElapsedTime(&ms, e0[g], e1[g])); mx = std::max(mx, ms); }
      if (it >= 3) t.push_back(mx);
    }
    std::sort(t.begin(), t.end());
    float med = t[t.size() / 2];
    printf("%-22s world %d shard %4zu MiB: %.3f ms  %.1f GB/s per GPU (bus)\n", name, world, S >> 20, med,
           (double)S * (world - 1) / (med * 1e-3) / 1e9);
    fflush(stdout);
  };
  auto peers_of = [&](int g, bool outs) {
    Dsts d{}; d.n = 0;
    for (int i = 1; i < world; i++) { int h = (g + i) % world; d.p[d.n++] = outs ? out[h] + n * g : in[h]; }
    return d;
  };
  bool prof = only == "prof";
  if (!prof) {
    // Copy engine: each peer's copy on its own stream (forked from stream 0), joined back.
    std::vector<cudaEvent_t> fork(world * 8), join(world * 8);
    for (int g = 0; g < world; g++) { CK(cudaSetDevice(g)); for (int s = 0; s < 8; s++) {
      CK(cudaEventCreateWithFlags(&fork[g * 8 + s], cudaEventDisableTiming));
      CK(cudaEventCreateWithFlags(&join[g * 8 + s], cudaEventDisableTiming)); } }
    time("ce-at-once", [&](int g) {
      CK(cudaEventRecord(fork[g * 8], st[g * 8]));
      for (int i = 1; i < world; i++) CK(cudaStreamWaitEvent(st[g * 8 + i], fork[g * 8], 0));
      for (int i = 1; i < world; i++) { int h = (g + i) % world;
        CK(cudaMemcpyPeerAsync(out[h] + n * g, h, in[g], g, S, st[g * 8 + i]));
        CK(cudaEventRecord(join[g * 8 + i], st[g * 8 + i])); }
      for (int i = 1; i < world; i++) CK(cudaStreamWaitEvent(st[g * 8], join[g * 8 + i], 0));
    });
    time("ce-one-peer", [&](int g) { int h = (g + 1) % world;
      CK(cudaMemcpyPeerAsync(out[h] + n * g, h, in[g], g, S, st[g * 8])); });
  }
  int bl[] = {16, 32, 66, 132, 264};
  for (int b : bl) {
    if (prof && b != 132) continue;
    char nm[64];
    snprintf(nm, sizeof nm, "fan-%d", b);
    time(nm, [&](int g) { fan<<<b, THREADS, 0, st[g * 8]>>>(in[g], peers_of(g, true), n); });
    snprintf(nm, sizeof nm, "split-%d", b);
    time(nm, [&](int g) { split<<<b - b % (world - 1), THREADS, 0, st[g * 8]>>>(in[g], peers_of(g, true), n); });
    snprintf(nm, sizeof nm, "pull-%d", b);
    time(nm, [&](int g) {
      Dsts o{}; o.n = 0;
      for (int i = 1; i < world; i++) { int h = (g + i) % world; o.p[o.n++] = out[g] + n * h; }
      pull<<<b - b % (world - 1), THREADS, 0, st[g * 8]>>>(peers_of(g, false), o, n); });
    CK(cudaGetLastError());
    if (b > 132) continue;
    snprintf(nm, sizeof nm, "tma-fan-%d", b);
    int smem = ST * CH + 8 * ST;
    for (int g = 0; g < world; g++) { CK(cudaSetDevice(g)); CK(cudaFuncSetAttribute(tma_fan, cudaFuncAttributeMaxDynamicSharedMemorySize, smem)); }
    time(nm, [&](int g) { tma_fan<<<b, 32, smem, st[g * 8]>>>((const char*)in[g], peers_of(g, true), S); });
    CK(cudaGetLastError());
  }
  // Check: out[g] shard h holds h+1 bytes.
  for (int g = 0; g < world; g++) for (int h = 0; h < world; h++) if (h != g) {
    unsigned char c; CK(cudaSetDevice(g)); CK(cudaMemcpy(&c, (char*)(out[g] + n * h) + S - 1, 1, cudaMemcpyDeviceToHost));
    if (c != h + 1) { printf("WRONG: gpu %d shard %d holds %d\n", g, h, c); return 1; }
  }
  printf("check ok\n");
  return 0;
}
