// queue_latency: what one dependent load costs while bulk copies are queued, by how the copies are issued.
//
// Why: sessions 5-19 found the batch-1 decode layer's dependent chain (the attention's q/k/v reads, K/V tiles,
// split writes, counters, the merge) slower by about as much as any bytes moved beside it save: staging more o rows,
// prefetching the next MLP's rows into L2, or queueing more of a ring before a PDL wait each shifted time between the
// chain and the stream (ITERATIONS.md sessions 7-19, profiles/decode-step-qwen3-8b.md). Every one of those issued its
// bytes at once: 128 CTAs x 192 KB of staged o rows is ~25 MB queued in front of the chain's first load. If the
// memory system serves requests roughly in order, a load issued behind that queue waits for it, however few of those
// bytes the HBM needs in flight to stay busy. This tool measures that directly, with nothing of the engine around it:
//   * one CTA an SM (132); warp 0's lane 0 bulk-copies the CTA's `--kb` of fresh bytes (never in L2) into shared
//     memory in 8 KB copies, either all at once ("burst", as the staging does) or with only `window` copies in
//     flight, the next one issued as the oldest lands ("paced");
//   * CTAs [0, --probes) also run a pointer chase on warp 1's lane 0: each load's address depends on the value of the
//     one before, so every load pays the full round trip. The chase reads either lines of a 1 GB buffer (HBM misses,
//     like the K/V tiles and unstaged o rows) or lines it read before the start (L2 hits, like the qkv output, the
//     split partials and the counters);
//   * which CTAs copy: every CTA, only the non-probing ones (the probing SMs' own queues empty), or none (idle).
// All CTAs start together (a grid-wide counter), so the copies and the chase begin at the same moment. Printed per
// mode: when the last CTA's copies had landed (span) and the rate that makes, and the chase's mean latency by when its
// loads were issued. Results: bench/results/queue-latency-<time>.json.
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_common.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/common/reduce.cuh"

namespace qwen3::bench {
namespace {

using kernels::bulk_copy_g2s;
using kernels::fence_mbarrier_init;
using kernels::global_timer_ns;
using kernels::kWarpSize;
using kernels::make_evict_first_policy;
using kernels::mbarrier_arrive_expect_tx;
using kernels::mbarrier_init;
using kernels::mbarrier_wait_parity;
using kernels::spin_until_at_least;

constexpr int kThreads = 64;      // warp 0 copies, warp 1 probes
constexpr int kMaxChunks = 64;    // mbarriers: one a copy
constexpr int kBarrierBytes = kMaxChunks * 8;
constexpr int kLineWords = 32;    // a 128-byte line of uint32
constexpr int kL2Lines = 64;      // lines an L2 chase walks (8 KB, warmed before the start)

enum Issuers { kAllCtas = 0, kOtherCtas = 1, kNoCtas = 2 };

struct Params {
  const unsigned char* background;  // (ctas, chunks * chunk_bytes): this run's copy sources, fresh (not in L2)
  const uint32_t* l2_chase;         // (probes, kL2Lines, kLineWords) random words
  const uint32_t* hbm_chase;        // (hbm_lines, kLineWords) random words
  int64_t hbm_lines;
  uint32_t* start_counter;          // zero before the launch
  int chunk_bytes, chunks;          // the copies a CTA issues
  int window;                       // copies in flight a CTA; 0: all at once
  int issuers;                      // Issuers
  int probes;                       // CTAs [0, probes) chase
  int probe_loads;                  // dependent loads a chase
  bool probe_hbm;                   // chase hbm_chase (misses) or l2_chase (hits)
  uint32_t seed;
  uint64_t* start_ns;               // (ctas): when the CTA passed the common start
  uint64_t* done_ns;                // (ctas): when its copies had all landed (0: it copied nothing)
  uint64_t* issue_ns;               // (probes, probe_loads): when each chase load was issued
  uint32_t* latency_cycles;         // (probes, probe_loads): its round trip in SM cycles
  uint64_t* calibration;            // (probes, 4): global ns and clock64 at the chase's start and end
  uint32_t* sink;                   // (ctas): the chase's last value (keeps its loads)
};

[[maybe_unused]] __device__ __forceinline__ uint32_t load_cg(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

[[maybe_unused]] __device__ __forceinline__ uint64_t clock_cycles() {
  uint64_t c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
  return c;
}

// PRECOND: sm_90; gridDim.x CTAs all resident at once (one an SM); chunks <= kMaxChunks; the dynamic shared memory
// holds kBarrierBytes + chunks * chunk_bytes; chunk_bytes a multiple of 16.
__global__ void __launch_bounds__(kThreads, 1) queue_probe(Params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint32_t consumed;  // where the chase stores each value, so the clock read after it waits for the load
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem);
  unsigned char* dst = smem + kBarrierBytes;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize, cta = blockIdx.x;
  const bool copies = p.issuers == kAllCtas || (p.issuers == kOtherCtas && cta >= p.probes);
  const bool chases = cta < p.probes && p.probe_loads > 0;
  const uint32_t* l2_lines = p.l2_chase + int64_t(cta) * kL2Lines * kLineWords;
  if (threadIdx.x == 0) {
    for (int i = 0; i < p.chunks; ++i) mbarrier_init(bars + i, 1);
    fence_mbarrier_init();
  }
  if (chases && warp == 1 && !p.probe_hbm) {  // the L2 chase's lines into L2 before the start
    uint32_t sum = 0;
    for (int i = lane; i < kL2Lines; i += kWarpSize) sum += load_cg(l2_lines + i * kLineWords);
    if (sum == 0x9e3779b9u) consumed = sum;  // keeps the loads
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    atomicAdd(p.start_counter, 1u);
    spin_until_at_least(p.start_counter, gridDim.x);
    p.start_ns[cta] = global_timer_ns();
  }
  __syncthreads();

  if (warp == 0 && lane == 0) {
    if (copies) {
      const uint64_t policy = make_evict_first_policy();
      const unsigned char* src = p.background + int64_t(cta) * p.chunks * p.chunk_bytes;
      const int ahead = p.window > 0 ? min(p.window, p.chunks) : p.chunks;
      const auto issue = [&](int i) {
        mbarrier_arrive_expect_tx(bars + i, uint32_t(p.chunk_bytes));
        bulk_copy_g2s(dst + int64_t(i) * p.chunk_bytes, src + int64_t(i) * p.chunk_bytes, uint32_t(p.chunk_bytes),
                      bars + i, policy);
      };
      for (int i = 0; i < ahead; ++i) issue(i);
      for (int i = 0; i < p.chunks; ++i) {
        mbarrier_wait_parity(bars + i, 0);
        if (i + ahead < p.chunks) issue(i + ahead);
      }
      p.done_ns[cta] = global_timer_ns();
    } else {
      p.done_ns[cta] = 0;
    }
  }
  if (warp == 1 && lane == 0 && chases) {
    uint32_t v = p.seed * 2654435761u + uint32_t(cta);
    const uint64_t g0 = global_timer_ns(), c0 = clock_cycles();
    for (int k = 0; k < p.probe_loads; ++k) {
      const uint32_t* line = p.probe_hbm ? p.hbm_chase + ((v * 2654435761ull + k) % uint64_t(p.hbm_lines)) * kLineWords
                                         : l2_lines + (v % kL2Lines) * kLineWords;
      const uint64_t issued = global_timer_ns();
      const uint64_t before = clock_cycles();
      v = load_cg(line);
      *static_cast<volatile uint32_t*>(&consumed) = v;  // waits for the load: in-order issue holds the clock read
      const uint64_t after = clock_cycles();
      p.issue_ns[int64_t(cta) * p.probe_loads + k] = issued;
      p.latency_cycles[int64_t(cta) * p.probe_loads + k] = uint32_t(after - before);
      v += uint32_t(k);
    }
    const uint64_t g1 = global_timer_ns(), c1 = clock_cycles();
    uint64_t* cal = p.calibration + int64_t(cta) * 4;
    cal[0] = g0, cal[1] = c0, cal[2] = g1, cal[3] = c1;
    p.sink[cta] = consumed;
  }
#endif
}

struct Mode {
  std::string name;
  int window, issuers;
};

struct Outcome {
  double span_us = 0, rate_GB_s = 0;   // copies: last landed after the common start; bytes / span
  std::vector<double> bucket_ns;       // mean chase latency by issue time (kBucketEdges)
  std::vector<int64_t> bucket_count;
  double during_ns = 0;                // mean over loads issued before the span ended (all, when nothing copies)
};

const double kBucketEdges[] = {0, 1, 2, 3, 4, 6, 8, 12, 1e9};  // us after the common start
constexpr int kBuckets = 8;

int run(int argc, char** argv) {
  CLI::App app{"queue_latency: a dependent load's round trip while bulk copies are queued, burst or paced"};
  int kb = 192, chunk_kb = 8, probes = 48, probe_loads = 96, runs = 12;
  std::string out;
  app.add_option("--kb", kb, "bytes each copying CTA moves, KB (qkv_attention_o stages 192)")
      ->check(CLI::Range(8, 224));
  app.add_option("--chunk-kb", chunk_kb, "one bulk copy, KB (the staging copies 8 KB rows)")->check(CLI::Range(1, 64));
  app.add_option("--probes", probes, "CTAs that chase (the attention's split CTAs: 48 at prompt 128)")
      ->check(CLI::Range(1, 132));
  app.add_option("--probe-loads", probe_loads, "dependent loads a chase")->check(CLI::Range(8, 4096));
  app.add_option("--runs", runs, "launches per mode and chase kind (fresh copy sources each)")
      ->check(CLI::Range(2, 64));
  app.add_option("--out", out, "JSON path (default bench/results/queue-latency-<time>.json)");
  CLI11_PARSE(app, argc, argv);
  if (kb % chunk_kb != 0 || kb / chunk_kb > kMaxChunks) {
    std::fprintf(stderr, "error: --kb must be a multiple of --chunk-kb, at most %d copies\n", kMaxChunks);
    return 2;
  }
  const GpuInfo gpu = gpu_info();
  if (gpu.cc_major < 9) {
    std::fprintf(stderr, "error: queue_latency needs sm_90 (bulk copies); this GPU is sm_%d%d\n", gpu.cc_major,
                 gpu.cc_minor);
    return 2;
  }
  const int ctas = gpu.sm_count, chunks = kb / chunk_kb, chunk_bytes = chunk_kb * 1024;
  probes = std::min(probes, ctas);
  const int64_t per_cta = int64_t(chunks) * chunk_bytes, per_run = per_cta * ctas;
  const int64_t hbm_lines = (int64_t(1) << 30) / (kLineWords * 4);

  // Copy sources for every launch, each used once: never in L2 when copied.
  const std::vector<Mode> modes = {
      {"idle (nothing copies)", 0, kNoCtas},  {"burst, every CTA", 0, kAllCtas},
      {"burst, other CTAs", 0, kOtherCtas},   {"paced 1 in flight", 1, kAllCtas},
      {"paced 2 in flight", 2, kAllCtas},     {"paced 4 in flight", 4, kAllCtas},
      {"paced 8 in flight", 8, kAllCtas},     {"paced 4, other CTAs", 4, kOtherCtas},
  };
  const int launches = int(modes.size()) * 2 * runs;
  unsigned char* background = nullptr;
  BENCH_CHECK(cudaMalloc(&background, size_t(per_run) * launches));
  fill_random_u32(background, size_t(per_run) * launches / 4, 7, nullptr);
  uint32_t *l2_chase = nullptr, *hbm_chase = nullptr, *counter = nullptr, *latency = nullptr;
  uint64_t *start_ns = nullptr, *done_ns = nullptr, *issue_ns = nullptr, *calibration = nullptr;
  uint32_t* sink = nullptr;
  BENCH_CHECK(cudaMalloc(&l2_chase, size_t(ctas) * kL2Lines * kLineWords * 4));
  BENCH_CHECK(cudaMalloc(&hbm_chase, size_t(hbm_lines) * kLineWords * 4));
  fill_random_u32(l2_chase, size_t(ctas) * kL2Lines * kLineWords, 11, nullptr);
  fill_random_u32(hbm_chase, size_t(hbm_lines) * kLineWords, 13, nullptr);
  BENCH_CHECK(cudaMalloc(&counter, 4));
  BENCH_CHECK(cudaMalloc(&start_ns, size_t(ctas) * 8));
  BENCH_CHECK(cudaMalloc(&done_ns, size_t(ctas) * 8));
  BENCH_CHECK(cudaMalloc(&issue_ns, size_t(probes) * probe_loads * 8));
  BENCH_CHECK(cudaMalloc(&latency, size_t(probes) * probe_loads * 4));
  BENCH_CHECK(cudaMalloc(&calibration, size_t(probes) * 4 * 8));
  BENCH_CHECK(cudaMalloc(&sink, size_t(ctas) * 4));
  const int smem = kBarrierBytes + int(per_cta);
  BENCH_CHECK(cudaFuncSetAttribute(queue_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  BENCH_CHECK(cudaDeviceSynchronize());

  std::printf("%s, %d SMs: %d KB a copying CTA in %d KB copies (%.1f MB a launch), %d chasing CTAs x %d loads, "
              "%d runs a mode\n",
              gpu.name.c_str(), ctas, kb, chunk_kb, double(per_run) / 1e6, probes, probe_loads, runs);
  std::printf("%-22s %-4s %9s %9s %10s | mean latency (ns) of loads issued [a, b) us after the start\n", "mode",
              "hits", "span us", "GB/s", "during ns");
  std::printf("%-22s %-4s %9s %9s %10s |", "", "", "", "", "");
  for (int b = 0; b < kBuckets; ++b)
    std::printf(b + 1 < kBuckets ? " %4.0f-%-3.0f" : " %4.0f+   ", kBucketEdges[b], kBucketEdges[b + 1]);
  std::printf("\n");

  std::string json = "{\"tool\": \"queue_latency\", \"gpu\": \"" + gpu.name + "\", \"time\": \"" + utc_time(false) +
                     "\", \"kb\": " + std::to_string(kb) + ", \"chunk_kb\": " + std::to_string(chunk_kb) +
                     ", \"probes\": " + std::to_string(probes) + ", \"probe_loads\": " + std::to_string(probe_loads) +
                     ", \"runs\": " + std::to_string(runs) + ", \"rows\": [";
  int launch = 0;
  bool first_row = true;
  for (const Mode& mode : modes) {
    for (const bool hbm : {false, true}) {
      std::vector<double> spans, sums(kBuckets, 0.0), during;
      std::vector<int64_t> counts(kBuckets, 0);
      for (int r = 0; r < runs; ++r, ++launch) {
        Params p{};
        p.background = background + int64_t(launch) * per_run;
        p.l2_chase = l2_chase, p.hbm_chase = hbm_chase, p.hbm_lines = hbm_lines, p.start_counter = counter;
        p.chunk_bytes = chunk_bytes, p.chunks = chunks, p.window = mode.window, p.issuers = mode.issuers;
        p.probes = probes, p.probe_loads = probe_loads, p.probe_hbm = hbm, p.seed = uint32_t(launch * 7919 + 1);
        p.start_ns = start_ns, p.done_ns = done_ns, p.issue_ns = issue_ns, p.latency_cycles = latency;
        p.calibration = calibration, p.sink = sink;
        BENCH_CHECK(cudaMemset(counter, 0, 4));
        queue_probe<<<ctas, kThreads, smem>>>(p);
        BENCH_CHECK(cudaGetLastError());
        BENCH_CHECK(cudaDeviceSynchronize());
        std::vector<uint64_t> starts(ctas), dones(ctas), issues(size_t(probes) * probe_loads), cal(size_t(probes) * 4);
        std::vector<uint32_t> cycles(size_t(probes) * probe_loads);
        BENCH_CHECK(cudaMemcpy(starts.data(), start_ns, starts.size() * 8, cudaMemcpyDeviceToHost));
        BENCH_CHECK(cudaMemcpy(dones.data(), done_ns, dones.size() * 8, cudaMemcpyDeviceToHost));
        BENCH_CHECK(cudaMemcpy(issues.data(), issue_ns, issues.size() * 8, cudaMemcpyDeviceToHost));
        BENCH_CHECK(cudaMemcpy(cycles.data(), latency, cycles.size() * 4, cudaMemcpyDeviceToHost));
        BENCH_CHECK(cudaMemcpy(cal.data(), calibration, cal.size() * 8, cudaMemcpyDeviceToHost));
        const uint64_t t0 = *std::min_element(starts.begin(), starts.end());
        uint64_t last = 0;
        for (uint64_t d : dones) last = std::max(last, d);
        const double span_us = last > t0 ? double(last - t0) / 1e3 : 0.0;
        if (last > t0) spans.push_back(span_us);
        for (int c = 0; c < probes; ++c) {
          const double ns_per_cycle = double(cal[c * 4 + 2] - cal[c * 4]) / double(cal[c * 4 + 3] - cal[c * 4 + 1]);
          for (int k = 0; k < probe_loads; ++k) {
            const double at_us = double(issues[size_t(c) * probe_loads + k] - t0) / 1e3;
            const double ns = double(cycles[size_t(c) * probe_loads + k]) * ns_per_cycle;
            int b = 0;
            while (b + 1 < kBuckets && at_us >= kBucketEdges[b + 1]) ++b;
            sums[b] += ns, counts[b] += 1;
            if (span_us == 0.0 || at_us < span_us) during.push_back(ns);
          }
        }
      }
      Outcome o;
      if (!spans.empty()) {
        std::sort(spans.begin(), spans.end());
        o.span_us = spans[spans.size() / 2];
        const int copying = mode.issuers == kAllCtas ? ctas : ctas - probes;
        o.rate_GB_s = double(per_cta) * copying / (o.span_us * 1e3);
      }
      for (int b = 0; b < kBuckets; ++b) o.bucket_ns.push_back(counts[b] ? sums[b] / double(counts[b]) : 0.0);
      o.bucket_count = counts;
      double total = 0;
      for (double d : during) total += d;
      o.during_ns = during.empty() ? 0.0 : total / double(during.size());
      std::printf("%-22s %-4s %9.2f %9.0f %10.0f |", mode.name.c_str(), hbm ? "hbm" : "l2", o.span_us, o.rate_GB_s,
                  o.during_ns);
      for (int b = 0; b < kBuckets; ++b) {
        if (o.bucket_count[b]) std::printf(" %8.0f", o.bucket_ns[b]);
        else std::printf(" %8s", "-");
      }
      std::printf("\n");
      json += std::string(first_row ? "" : ", ") + "{\"mode\": \"" + mode.name + "\", \"window\": " +
              std::to_string(mode.window) + ", \"issuers\": " + std::to_string(mode.issuers) + ", \"chase\": \"" +
              (hbm ? "hbm" : "l2") + "\", \"span_us\": " + std::to_string(o.span_us) + ", \"GB_s\": " +
              std::to_string(o.rate_GB_s) + ", \"during_ns\": " + std::to_string(o.during_ns) + ", \"bucket_ns\": [";
      for (int b = 0; b < kBuckets; ++b)
        json += (b ? ", " : "") + std::to_string(o.bucket_ns[b]);
      json += "], \"bucket_loads\": [";
      for (int b = 0; b < kBuckets; ++b) json += (b ? ", " : "") + std::to_string(o.bucket_count[b]);
      json += "]}";
      first_row = false;
    }
  }
  json += "], \"bucket_edges_us\": [";
  for (int b = 0; b <= kBuckets; ++b) json += (b ? ", " : "") + std::to_string(kBucketEdges[b]);
  json += "]}\n";
  if (write_results(out, "queue-latency", json) != 0) return 1;
  for (void* b : {static_cast<void*>(background), static_cast<void*>(l2_chase), static_cast<void*>(hbm_chase),
                  static_cast<void*>(counter), static_cast<void*>(start_ns), static_cast<void*>(done_ns),
                  static_cast<void*>(issue_ns), static_cast<void*>(latency), static_cast<void*>(calibration),
                  static_cast<void*>(sink)})
    BENCH_CHECK(cudaFree(b));
  return 0;
}

}  // namespace
}  // namespace qwen3::bench

int main(int argc, char** argv) { return qwen3::bench::run(argc, argv); }
