// l2_retention: whether bytes pulled into L2 are still there after other bytes stream through, by the pull's L2
// priority.
//
// Why: seven attempts (sessions 1, 3, 7, 9, 11, 21) to move a later launch's weights into L2 during the decode
// layer's HBM-idle microseconds gained nothing. The last one (qkv_attention_o v27, session 21) pulled 6-10 MB of the
// next MLP's rows a layer, paced, evict-normal, and the MLP after its release was no shorter. Were the rows gone from
// L2 when the MLP read them (~34 MB of evict-first streams pass through L2 in between: the MLP's first ring groups and
// the o rows not staged), and what is a hit worth to each way the engine reads? This tool answers both with nothing of
// the engine around it. One CTA an SM bulk-copies its share of a buffer into shared memory (8 KB copies,
// `--window` in flight), as the engine's staging does; or (--path loads) 512 threads an SM load it 16 bytes at a
// time, as the o loop does; or (--path cp-async) the MLP's cp.async ring copies it; one trial is, launch after launch
// on one stream:
//   1. flush: 256 fresh MB read evict-normal (whatever an earlier trial left, at any priority below evict-last,
//      is older and goes), then 256 more evict-first (L2 then holds evict-first lines, as in the decode step);
//   2. pull: `--pull-mb` of buffer A with the policy under test (evict-normal, evict-first, evict-last);
//   3. stream: S MB of fresh bytes with evict-first (S from --stream-mb-list);
//   4. read back: A again with evict-first, timed (first CTA start to last CTA done, %globaltimer).
// Baselines: A read back cold (no pull) and hot (pulled evict-normal, nothing streamed between). Printed: the read-back
// time and rate, and the share of A still in L2 estimated as (cold - t) / (cold - hot), where hot is at least 5%
// faster than cold (otherwise "-": reads from L2 are no faster than from HBM at that size, and the time cannot say).
// Measured on the H200 (session 21, l2-retention-20261201T17*.json; L2 60 MB): 40 MB read back by the MLP's cp.async
// ring in 5.25 us from L2 against 9.76 from HBM (1.86x), by 16-byte loads 5.82 against 9.92, by bulk copies 10.40
// against 10.46 (the TMA path tops out near the HBM rate whatever the source). Evict-normal and evict-last lines
// survive 34-128 MB of evict-first streams (83-100%); evict-first ones are gone after 34 MB. Results:
// bench/results/l2-retention-<time>.json.
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_common.cuh"
#include "kernels/02_gemm/gemv_ring.cuh"
#include "kernels/common/ptx.cuh"

namespace qwen3::bench {
namespace {

using kernels::bulk_copy_g2s;
using kernels::fence_mbarrier_init;
using kernels::global_timer_ns;
using kernels::mbarrier_arrive_expect_tx;
using kernels::mbarrier_init;
using kernels::mbarrier_wait_parity;

constexpr int kChunkBytes = 8192;  // one copy: a Qwen3-8B weight row
constexpr int kMaxWindow = 16;
constexpr int kSmemBytes = 1024 + kMaxWindow * kChunkBytes;  // the barriers, then the slots (and one CTA an SM)
// The pull's L2 priority (kernels::L2Priority, in this order).
enum Policy { kEvictNormal = kernels::kL2EvictNormal, kEvictFirst = kernels::kL2EvictFirst,
              kEvictLast = kernels::kL2EvictLast };
const char* const kPolicyNames[] = {"evict-normal", "evict-first", "evict-last"};

// CTA c copies bytes [c * per_cta, (c + 1) * per_cta) of src into shared memory, `window` 8 KB copies in flight,
// stamping when it starts and when its last copy has landed. PRECOND: sm_90; per_cta a multiple of kChunkBytes;
// 1 <= window <= kMaxWindow; kSmemBytes of dynamic shared memory.
__global__ void __launch_bounds__(32, 1)
    stream_copy(const unsigned char* src, int64_t per_cta, int window, int policy_kind, uint64_t* start_ns,
                uint64_t* done_ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem);
  unsigned char* slots = smem + 1024;
  if (threadIdx.x != 0) return;
  start_ns[blockIdx.x] = global_timer_ns();
  for (int i = 0; i < window; ++i) mbarrier_init(bars + i, 1);
  fence_mbarrier_init();
  const uint64_t policy = kernels::make_l2_policy(policy_kind);
  const unsigned char* mine = src + int64_t(blockIdx.x) * per_cta;
  const int64_t chunks = per_cta / kChunkBytes;
  for (int64_t c = 0; c < chunks; ++c) {
    const int slot = int(c % window);
    if (c >= window) mbarrier_wait_parity(bars + slot, uint32_t((c / window - 1) & 1));
    mbarrier_arrive_expect_tx(bars + slot, kChunkBytes);
    bulk_copy_g2s(slots + slot * kChunkBytes, mine + c * kChunkBytes, kChunkBytes, bars + slot, policy);
  }
  for (int64_t c = chunks > window ? chunks - window : 0; c < chunks; ++c)
    mbarrier_wait_parity(bars + c % window, uint32_t((c / window) & 1));
  done_ns[blockIdx.x] = global_timer_ns();
#endif
}

// --path loads: the same bytes by 16-byte loads into registers (ld.global.nc, L1 bypassed, with the L2 policy), as
// the attention launch's o loop reads its unstaged rows: 512 threads an SM, each with `window` loads in flight (window
// x 8 KB an SM, as many bytes as the copies). The values are folded into a word the compiler must keep. PRECOND:
// per_cta a multiple of 16; 1 <= window <= kMaxWindow.
constexpr int kLoadThreads = 512;
__global__ void __launch_bounds__(kLoadThreads, 1)
    stream_load(const unsigned char* src, int64_t per_cta, int window, int policy_kind, uint64_t* start_ns,
                uint64_t* done_ns, uint32_t* sink) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0) start_ns[blockIdx.x] = global_timer_ns();
  const uint64_t policy = kernels::make_l2_policy(policy_kind);
  const uint4* mine = reinterpret_cast<const uint4*>(src + int64_t(blockIdx.x) * per_cta);
  const int64_t vecs = per_cta / 16, step = int64_t(kLoadThreads) * window;
  uint32_t folded = 0;
  for (int64_t first = threadIdx.x; first < vecs; first += step) {
    uint4 v[kMaxWindow];
#pragma unroll
    for (int u = 0; u < kMaxWindow; ++u)
      v[u] = u < window && first + int64_t(u) * kLoadThreads < vecs
                 ? kernels::load_stream_16B(mine + first + int64_t(u) * kLoadThreads, policy)
                 : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < kMaxWindow; ++u) folded ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  __syncthreads();
  if (threadIdx.x == 0) done_ns[blockIdx.x] = global_timer_ns();
  if (folded == 0x9e3779b9u) sink[blockIdx.x] = folded;
#endif
}

// --path cp-async: every evict-first read (the read back, the stream, the flush's second half, an evict-first pull)
// by the MLP's own ring copy (norm_mlp v13 / v15, gemv_ring::copy_rows): 512 threads an SM, each copying its 16 bytes
// of every 8 KB row with cp.async (L1 bypassed, evict-first) into a ring of 3 groups of 8 rows, all 3 groups (192 KB)
// in flight, the next group issued into a stage once its group has landed. The evict-normal and evict-last reads stay
// bulk copies (a line's L2 priority is the policy that filled it, whatever the path). A first form with its own loop
// and a run-time policy choice trapped on the H200 (illegal instruction; its SASS read a global-memory descriptor
// from uniform registers it never wrote). PRECOND: per_cta a multiple of kChunkBytes; kRingBytes of dynamic shared
// memory.
constexpr int kRingGroups = 3, kRingRows = 8;
constexpr int kRingBytes = kRingGroups * kRingRows * kChunkBytes;
constexpr int kRowElems = kChunkBytes / 2;  // a row of bf16, one 16-byte piece a thread
static_assert(kRowElems / 8 == kLoadThreads, "copy_rows: one 16-byte piece of a row a thread");
__global__ void __launch_bounds__(kLoadThreads, 1)
    stream_ring(const unsigned char* src, int64_t per_cta, uint64_t* start_ns, uint64_t* done_ns) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem_ring[];
  if (threadIdx.x == 0) start_ns[blockIdx.x] = global_timer_ns();
  const uint64_t policy = kernels::make_evict_first_policy();
  uint4* const ring = reinterpret_cast<uint4*>(smem_ring) + threadIdx.x;  // this thread's piece of stage 0, row 0
  const auto* rows_src =  // this thread's piece of the CTA's first row
      reinterpret_cast<const kernels::bf16*>(src + int64_t(blockIdx.x) * per_cta) + threadIdx.x * 8;
  const int rows = int(per_cta / kChunkBytes), groups = (rows + kRingRows - 1) / kRingRows;
  for (int g = 0, stage = 0; g < groups; ++g, stage = stage == kRingGroups - 1 ? 0 : stage + 1) {
    if (g >= kRingGroups) kernels::cp_async_wait<kRingGroups - 1>();  // group g - 3 has landed: its stage is free
    kernels::gemv_ring::copy_rows<kRingRows, kRowElems, kLoadThreads>(
        ring + stage * (kRingRows * kLoadThreads), rows_src + int64_t(g) * kRingRows * kRowElems,
        min(kRingRows, rows - g * kRingRows), policy);
    kernels::cp_async_commit();
  }
  kernels::cp_async_wait<0>();
  __syncthreads();
  if (threadIdx.x == 0) done_ns[blockIdx.x] = global_timer_ns();
#endif
}

enum Path { kBulkCopies = 0, kLoads = 1, kCpAsyncRing = 2 };

struct Launcher {
  int ctas, window;
  int path;  // Path
  uint64_t *start_ns, *done_ns;
  uint32_t* sink;
  // bytes (rounded down to whole copies a CTA) of src by every CTA; returns first start to last done, us.
  double operator()(const unsigned char* src, int64_t bytes, int policy) const {
    const int64_t per_cta = bytes / ctas / kChunkBytes * kChunkBytes;
    if (per_cta == 0) return 0.0;
    // (cp-async: the evict-first reads only)
    const int how = path == kCpAsyncRing && policy != kEvictFirst ? kBulkCopies : path;
    if (how == kLoads)
      stream_load<<<ctas, kLoadThreads>>>(src, per_cta, window, policy, start_ns, done_ns, sink);
    else if (how == kCpAsyncRing)
      stream_ring<<<ctas, kLoadThreads, kRingBytes>>>(src, per_cta, start_ns, done_ns);
    else
      stream_copy<<<ctas, 32, kSmemBytes>>>(src, per_cta, window, policy, start_ns, done_ns);
    BENCH_CHECK(cudaGetLastError());
    BENCH_CHECK(cudaDeviceSynchronize());
    std::vector<uint64_t> starts(static_cast<size_t>(ctas)), dones(static_cast<size_t>(ctas));
    BENCH_CHECK(cudaMemcpy(starts.data(), start_ns, size_t(ctas) * 8, cudaMemcpyDeviceToHost));
    BENCH_CHECK(cudaMemcpy(dones.data(), done_ns, size_t(ctas) * 8, cudaMemcpyDeviceToHost));
    return double(*std::max_element(dones.begin(), dones.end()) - *std::min_element(starts.begin(), starts.end())) /
           1e3;
  }
};

int run(int argc, char** argv) {
  CLI::App app{"l2_retention: whether bytes pulled into L2 survive other bytes streaming through, by L2 priority"};
  int pull_mb = 16, window = 8, runs = 5;
  std::string stream_list = "0,8,16,34,64,128", out;
  app.add_option("--pull-mb", pull_mb, "bytes pulled into L2 and read back, MB (v27 pulled ~15 a layer)")
      ->check(CLI::Range(1, 40));
  app.add_option("--stream-mb-list", stream_list, "fresh bytes streamed between the pull and the read back, MB");
  app.add_option("--window", window, "8 KB copies (or loads a thread) in flight a CTA")
      ->check(CLI::Range(1, kMaxWindow));
  std::string path_name = "bulk";
  app.add_option("--path", path_name,
                 "how the SMs read: bulk (8 KB bulk copies, one thread an SM, --window in flight), loads (16-byte "
                 "loads of 512 threads, --window a thread) or cp-async (the MLP's ring: 3 x 64 KB in flight)")
      ->check(CLI::IsMember({"bulk", "loads", "cp-async"}));
  app.add_option("--runs", runs, "trials per point (the median is printed)")->check(CLI::Range(1, 32));
  app.add_option("--out", out, "JSON path (default bench/results/l2-retention-<time>.json)");
  CLI11_PARSE(app, argc, argv);
  const int path = path_name == "loads" ? kLoads : path_name == "cp-async" ? kCpAsyncRing : kBulkCopies;
  std::vector<int> streams;
  {
    std::stringstream ss(stream_list);
    for (std::string item; std::getline(ss, item, ',');) {
      char* end = nullptr;
      const long v = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || v < 0 || v > 1024) {
        std::fprintf(stderr, "error: --stream-mb-list takes MB values 0-1024 separated by commas, got '%s'\n",
                     item.c_str());
        return 2;
      }
      streams.push_back(int(v));
    }
  }
  const GpuInfo gpu = gpu_info();
  if (gpu.cc_major < 9) {
    std::fprintf(stderr, "error: l2_retention needs sm_90 (bulk copies); this GPU is sm_%d%d\n", gpu.cc_major,
                 gpu.cc_minor);
    return 2;
  }
  int l2_bytes = 0;
  BENCH_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, 0));
  const int ctas = gpu.sm_count;
  constexpr int64_t kMB = int64_t(1) << 20, kFlushBytes = 256 * kMB;
  const int64_t pull_bytes = int64_t(pull_mb) * kMB;
  const int64_t max_stream = *std::max_element(streams.begin(), streams.end()) * kMB;
  // Fresh bytes for every flush and stream of every trial: one ring of buffers, used in turn, each far larger than L2.
  const int64_t fresh_bytes = 2 * (2 * kFlushBytes + max_stream) + 64 * kMB;
  unsigned char *a = nullptr, *fresh = nullptr;
  uint64_t *start_ns = nullptr, *done_ns = nullptr;
  uint32_t* sink = nullptr;
  BENCH_CHECK(cudaMalloc(&a, size_t(pull_bytes)));
  BENCH_CHECK(cudaMalloc(&fresh, size_t(fresh_bytes)));
  BENCH_CHECK(cudaMalloc(&start_ns, size_t(ctas) * 8));
  BENCH_CHECK(cudaMalloc(&done_ns, size_t(ctas) * 8));
  BENCH_CHECK(cudaMalloc(&sink, size_t(ctas) * 4));
  fill_random_u32(a, size_t(pull_bytes / 4), 3, nullptr);
  fill_random_u32(fresh, size_t(fresh_bytes / 4), 5, nullptr);
  BENCH_CHECK(cudaFuncSetAttribute(stream_copy, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  BENCH_CHECK(cudaFuncSetAttribute(stream_ring, cudaFuncAttributeMaxDynamicSharedMemorySize, kRingBytes));
  BENCH_CHECK(cudaDeviceSynchronize());
  const Launcher copy{ctas, window, path, start_ns, done_ns, sink};
  int64_t fresh_at = 0;  // the next fresh bytes: consecutive flushes and streams never reuse what is still in L2
  const auto take_fresh = [&](int64_t bytes) {
    if (fresh_at + bytes > fresh_bytes) fresh_at = 0;
    const unsigned char* p = fresh + fresh_at;
    fresh_at += bytes;
    return p;
  };
  // One trial: flush, then (policy >= 0) pull A and stream S MB, then A read back; the read back's span, us.
  const auto trial = [&](int policy, int stream_mb) {
    BENCH_CHECK(cudaCtxResetPersistingL2Cache());  // evict-last lines of an earlier trial back to normal
    copy(take_fresh(kFlushBytes), kFlushBytes, kEvictNormal);
    copy(take_fresh(kFlushBytes), kFlushBytes, kEvictFirst);
    if (policy >= 0) {
      copy(a, pull_bytes, policy);
      if (stream_mb > 0) copy(take_fresh(stream_mb * kMB), stream_mb * kMB, kEvictFirst);
    }
    return copy(a, pull_bytes, kEvictFirst);
  };
  const auto median_of = [&](int policy, int stream_mb) {
    std::vector<double> t;
    for (int r = 0; r < runs; ++r) t.push_back(trial(policy, stream_mb));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  const double cold = median_of(-1, 0), hot = median_of(kEvictNormal, 0);
  const auto rate = [&](double us) { return us > 0 ? double(pull_bytes) / (us * 1e3) : 0.0; };
  std::printf("%s, %d SMs, L2 %.1f MB: %d MB pulled, read back after S MB of evict-first streams (%s, median of "
              "%d)\n",
              gpu.name.c_str(), ctas, double(l2_bytes) / kMB, pull_mb,
              (path == kLoads ? "512 threads an SM, " + std::to_string(window) + " 16-byte loads in flight a thread"
               : path == kCpAsyncRing ? std::string("the MLP's cp.async ring, 192 KB in flight an SM")
                                      : std::to_string(window) + " bulk copies of 8 KB in flight an SM")
                  .c_str(),
              runs);
  std::printf("read back cold %.2f us (%.0f GB/s), hot %.2f us (%.0f GB/s)\n", cold, rate(cold), hot, rate(hot));
  std::printf("%-13s %8s %10s %9s %12s\n", "pulled as", "S (MB)", "read us", "GB/s", "still in L2");
  std::string json = "{\"tool\": \"l2_retention\", \"gpu\": \"" + gpu.name + "\", \"time\": \"" + utc_time(false) +
                     "\", \"l2_bytes\": " + std::to_string(l2_bytes) + ", \"pull_mb\": " + std::to_string(pull_mb) +
                     ", \"window\": " + std::to_string(window) + ", \"path\": \"" +
                     path_name + "\", \"runs\": " + std::to_string(runs) +
                     ", \"cold_us\": " + std::to_string(cold) + ", \"hot_us\": " + std::to_string(hot) +
                     ", \"rows\": [";
  bool first_row = true;
  for (int policy : {kEvictNormal, kEvictFirst, kEvictLast}) {
    for (int s : streams) {
      const double t = median_of(policy, s);
      const bool tells = cold - hot >= 0.05 * cold;  // (else L2 and HBM read alike: no share can be inferred)
      const double kept = tells ? std::clamp((cold - t) / (cold - hot), 0.0, 1.0) : 0.0;
      if (tells)
        std::printf("%-13s %8d %10.2f %9.0f %11.0f%%\n", kPolicyNames[policy], s, t, rate(t), 100.0 * kept);
      else
        std::printf("%-13s %8d %10.2f %9.0f %12s\n", kPolicyNames[policy], s, t, rate(t), "-");
      json += std::string(first_row ? "" : ", ") + "{\"policy\": \"" + kPolicyNames[policy] +
              "\", \"stream_mb\": " + std::to_string(s) + ", \"read_us\": " + std::to_string(t) +
              ", \"still_in_l2\": " + (tells ? std::to_string(kept) : std::string("null")) + "}";
      first_row = false;
    }
  }
  json += "]}\n";
  if (write_results(out, "l2-retention", json) != 0) return 1;
  for (void* b : {static_cast<void*>(a), static_cast<void*>(fresh), static_cast<void*>(start_ns),
                  static_cast<void*>(done_ns), static_cast<void*>(sink)})
    BENCH_CHECK(cudaFree(b));
  return 0;
}

}  // namespace
}  // namespace qwen3::bench

int main(int argc, char** argv) { return qwen3::bench::run(argc, argv); }
