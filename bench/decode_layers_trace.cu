// decode_layers_trace: where the one-launch layer stack (decode_layers op) spends a decode step, from inside.
//
// Runs a decode_layers version on random Qwen3-8B-sized weights (36 layers by default, 15 GB), times it with events
// (median of --iters launches), then runs it once more with the trace buffer on: every CTA stamps %globaltimer at
// fixed points of every layer (kernels.h DecodeLayersArgs::trace). Printed per phase, averaged over layers:
// how long the CTAs spent in it (mean and slowest CTA), how long they waited before it, and how far ahead the
// weight producer was. A timing tool: the random weights give garbage activations, only the times count.
//
// Usage: decode_layers_trace [--layers 36] [--position 128] [--bucket 256] [--iters 20] [--version NAME] [--out DIR]
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/bench_common.cuh"
#include "kernels/common/check.h"
#include "kernels/kernels.h"
#include "kernels/registry.h"

namespace {

using qwen3::kernels::bf16;

template <class T>
T* device_alloc(int64_t n) {
  T* p = nullptr;
  CUDA_CHECK(cudaMalloc(&p, size_t(n) * sizeof(T)));
  return p;
}

// Uniform in [lo, hi) on the device (bench_common.cuh: no element exactly 0).
bf16* random_bf16(int64_t n, uint64_t seed, float lo, float hi) {
  bf16* p = device_alloc<bf16>(n);
  qwen3::bench::fill_random_bf16(p, size_t(n), seed, lo, hi, nullptr);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Trace the one-launch decode layer stack on random Qwen3-8B-sized weights"};
  int64_t layers = 36, position = 128, bucket = 256, iters = 20;
  int ring_stages = 0, split_keys = 0;
  std::string version = "v1_decode_layers_persistent", out_dir = std::string(QWEN3_SOURCE_DIR) + "/bench/results";
  app.add_option("--layers", layers, "Layers")->check(CLI::Range(1, 64));
  app.add_option("--position", position, "Position of the decoded token (keys attended: position + 1)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--bucket", bucket, "Context bucket the launch is sized for (max_position = bucket - 1)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--iters", iters, "Timed launches")->check(CLI::Range(1, 1000));
  app.add_option("--version", version, "decode_layers version");
  app.add_option("--stages", ring_stages, "Weight stages in flight per SM (0: as many as fit)")->check(CLI::Range(0, 16));
  app.add_option("--split-keys", split_keys, "Keys per attention split the plan aims at (0: the version's)")
      ->check(CLI::Range(0, 4096));
  app.add_option("--out", out_dir, "Directory for the JSON result");
  CLI11_PARSE(app, argc, argv);
  if (position >= bucket) {
    std::fprintf(stderr, "--position must be below --bucket\n");
    return 2;
  }
  const auto& v = qwen3::kernels::find_version(qwen3::kernels::decode_layers_versions(), version);

  // Qwen3-8B.
  const int64_t H = 4096, QH = 32, KVH = 8, D = 128, I = 12288, QD = QH * D, KVD = KVH * D;
  const int64_t max_ctx = bucket;
  std::vector<qwen3::kernels::DecodeLayerWeights> table;
  uint64_t seed = 1;
  const float k3 = 1.7320508f;
  for (int64_t l = 0; l < layers; ++l) {
    const auto weight = [&](int64_t n, int64_t k) {  // unit-variance outputs
      const float bound = k3 / std::sqrt(float(k));
      return random_bf16(n, ++seed, -bound, bound);
    };
    table.push_back({random_bf16(H, ++seed, 0.5f, 1.5f), random_bf16(H, ++seed, 0.5f, 1.5f),
                     random_bf16(D, ++seed, 0.5f, 1.5f), random_bf16(D, ++seed, 0.5f, 1.5f),
                     weight((QD + 2 * KVD) * H, H), weight(H * QD, QD), weight(2 * I * H, H), weight(H * I, I)});
  }
  auto* table_dev = device_alloc<qwen3::kernels::DecodeLayerWeights>(layers);
  CUDA_CHECK(cudaMemcpy(table_dev, table.data(), table.size() * sizeof(table[0]), cudaMemcpyHostToDevice));
  const int64_t cache_elems = max_ctx * KVD;
  bf16* k_cache = random_bf16(layers * cache_elems, ++seed, -1.0f, 1.0f);
  bf16* v_cache = random_bf16(layers * cache_elems, ++seed, -1.0f, 1.0f);
  bf16* h0 = random_bf16(H, ++seed, -1.0f, 1.0f);
  bf16* h = device_alloc<bf16>(H);
  int32_t* positions = device_alloc<int32_t>(1);
  const int32_t pos32 = int32_t(position);
  CUDA_CHECK(cudaMemcpy(positions, &pos32, 4, cudaMemcpyHostToDevice));
  std::vector<float> inv_freq_host(size_t(D / 2));
  for (int64_t i = 0; i < D / 2; ++i) inv_freq_host[size_t(i)] = std::pow(1e6f, -2.0f * float(i) / float(D));
  auto* inv_freq = device_alloc<float>(D / 2);
  CUDA_CHECK(cudaMemcpy(inv_freq, inv_freq_host.data(), size_t(D / 2) * 4, cudaMemcpyHostToDevice));
  const int64_t sync_words = qwen3::kernels::decode_layers_sync_words(layers, KVH);
  auto* sync = device_alloc<uint32_t>(sync_words);
  CUDA_CHECK(cudaMemset(sync, 0, size_t(sync_words) * 4));
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  auto* trace = device_alloc<uint64_t>(int64_t(sms) * layers * qwen3::kernels::kDecodeLayersTraceEvents);

  qwen3::kernels::DecodeLayersArgs a{table_dev, layers, H, QH, KVH, D, I, max_ctx,
                                     h, device_alloc<bf16>(QD + 2 * KVD), device_alloc<bf16>(QD), device_alloc<bf16>(I),
                                     k_cache, v_cache, cache_elems, positions, nullptr, inv_freq, 1.0f, 1e-6f,
                                     1.0f / std::sqrt(float(D)), bucket - 1,
                                     device_alloc<float>(qwen3::kernels::decode_layers_workspace_floats(KVH, D)), sync};
  a.ring_stages = ring_stages;
  a.split_keys = split_keys;
  if (!v.takes(a)) {
    std::fprintf(stderr, "%s does not support this shape or device\n", v.name);
    return 1;
  }
  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  qwen3::bench::EventPair events;
  std::vector<double> ms;
  for (int64_t i = 0; i < iters + 3; ++i) {
    CUDA_CHECK(cudaMemcpyAsync(h, h0, size_t(H) * 2, cudaMemcpyDeviceToDevice, stream));
    events.start(stream);
    v.launch(a, stream);
    events.stop(stream);
    const float t = events.elapsed_ms();
    if (i >= 3) ms.push_back(t);
  }
  const double step_ms = qwen3::bench::stats_of(ms).median;
  const double layer_bytes = 2.0 * double((QD + 2 * KVD) * H + H * QD + 2 * I * H + H * I);
  const double kv_bytes = 2.0 * double(2 * KVD * (position + 1));
  const double gb_s = double(layers) * (layer_bytes + kv_bytes) / (step_ms * 1e-3) / 1e9;

  // The traced launch.
  a.trace = trace;
  CUDA_CHECK(cudaMemset(trace, 0, size_t(sms) * size_t(layers) * qwen3::kernels::kDecodeLayersTraceEvents * 8));
  CUDA_CHECK(cudaMemcpyAsync(h, h0, size_t(H) * 2, cudaMemcpyDeviceToDevice, stream));
  v.launch(a, stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  const int E = qwen3::kernels::kDecodeLayersTraceEvents;
  std::vector<uint64_t> t(size_t(sms) * size_t(layers) * E);
  CUDA_CHECK(cudaMemcpy(t.data(), trace, t.size() * 8, cudaMemcpyDeviceToHost));
  const auto at = [&](int cta, int64_t l, int e) { return double(t[(size_t(cta) * size_t(layers) + size_t(l)) * E + e]); };
  // Event indices (v1's DecodeLayersTraceEvent).
  enum { LayerStart, QkvStart, QkvDone, AttnDone, OStart, ODone, GuStart, GuDone, DownStart, DownDone, PQkv, PO, PGu, PDown,
         SQkv, SO, SGu, SDown, AInput, ARoped, AKeys };
  struct Span {
    const char* name;
    int from, to;
  };
  const Span spans[] = {
      {"wait + norm before qkv", LayerStart, QkvStart}, {"qkv GEMV", QkvStart, QkvDone},
      {"attention (own split)", QkvDone, AttnDone},     {"wait for attn", AttnDone, OStart},
      {"o GEMV", OStart, ODone},                        {"wait + norm before gate|up", ODone, GuStart},
      {"gate|up GEMV", GuStart, GuDone},                {"wait before down", GuDone, DownStart},
      {"down GEMV", DownStart, DownDone},
  };
  nlohmann::json phases = nlohmann::json::array();
  std::printf("%s: %lld layers, position %lld, bucket %lld: %.3f ms per launch, %.0f GB/s (weights + KV)\n", v.name,
              (long long)layers, (long long)position, (long long)bucket, step_ms, gb_s);
  std::printf("%-28s %10s %10s   (us, averaged over layers 1..%lld)\n", "span", "mean CTA", "max CTA",
              (long long)layers - 1);
  for (const Span& sp : spans) {
    double mean_sum = 0, max_sum = 0;
    for (int64_t l = 1; l < layers; ++l) {
      double mean = 0, mx = 0;
      for (int c = 0; c < sms; ++c) {
        const double d = (at(c, l, sp.to) - at(c, l, sp.from)) * 1e-3;
        mean += d / sms;
        mx = std::max(mx, d);
      }
      mean_sum += mean;
      max_sum += mx;
    }
    const double n = double(layers - 1);
    std::printf("%-28s %10.2f %10.2f\n", sp.name, mean_sum / n, max_sum / n);
    phases.push_back({{"span", sp.name}, {"mean_cta_us", mean_sum / n}, {"max_cta_us", max_sum / n}});
  }
  // Layer period: the time between consecutive layers' qkv starts (slowest CTA).
  double period = 0;
  for (int64_t l = 1; l < layers; ++l) {
    double a0 = 0, a1 = 0;
    for (int c = 0; c < sms; ++c) a0 = std::max(a0, at(c, l - 1, QkvStart)), a1 = std::max(a1, at(c, l, QkvStart));
    period += (a1 - a0) * 1e-3 / double(layers - 1);
  }
  // Producer lead: how long before the consumers started a phase its first stage was issued.
  const std::pair<int, int> leads[] = {{PQkv, QkvStart}, {PO, OStart}, {PGu, GuStart}, {PDown, DownStart}};
  const char* lead_names[] = {"qkv", "o", "gate|up", "down"};
  std::printf("layer period %.2f us (bytes alone at 4.5 TB/s: %.2f us)\nproducer lead (us): ", period,
              (layer_bytes + kv_bytes) / 4.5e6);
  nlohmann::json lead_json;
  for (int i = 0; i < 4; ++i) {
    double lead = 0;
    for (int64_t l = 1; l < layers; ++l)
      for (int c = 0; c < sms; ++c)
        lead += (at(c, l, leads[i].second) - at(c, l, leads[i].first)) * 1e-3 / double(sms * (layers - 1));
    std::printf("%s %.2f  ", lead_names[i], lead);
    lead_json[lead_names[i]] = lead;
  }
  // The attention chain on the CTAs that ran a split (those with a later AInput stamp than their qkv done).
  {
    double in = 0, rope = 0, keys = 0, rest = 0;
    int n = 0;
    for (int64_t l = 1; l < layers; ++l)
      for (int c = 0; c < sms; ++c) {
        if (at(c, l, AInput) < at(c, l, QkvDone)) continue;
        in += (at(c, l, AInput) - at(c, l, QkvDone)) * 1e-3;
        rope += (at(c, l, ARoped) - at(c, l, AInput)) * 1e-3;
        keys += (at(c, l, AKeys) - at(c, l, ARoped)) * 1e-3;
        rest += (at(c, l, AttnDone) - at(c, l, AKeys)) * 1e-3;
        ++n;
      }
    if (n) std::printf("\nattention CTAs (us): wait qkv + load q/k/v %.2f, norm/rope/store %.2f, keys %.2f, merge + signal %.2f",
                       in / n, rope / n, keys / n, rest / n);
  }
  std::printf("\nstarved (us thread 0 waited for stages to land, mean CTA): ");
  nlohmann::json starved_json;
  const int starved_events[] = {SQkv, SO, SGu, SDown};
  for (int i = 0; i < 4; ++i) {
    double starved = 0;
    for (int64_t l = 1; l < layers; ++l)
      for (int c = 0; c < sms; ++c) starved += at(c, l, starved_events[i]) * 1e-3 / double(sms * (layers - 1));
    std::printf("%s %.2f  ", lead_names[i], starved);
    starved_json[lead_names[i]] = starved;
  }
  std::printf("\n");
  nlohmann::json j{{"tool", "decode_layers_trace"}, {"version", v.name},      {"layers", layers},
                   {"position", position},          {"bucket", bucket},        {"ms_per_launch", step_ms},
                   {"gb_s", gb_s},                  {"layer_period_us", period}, {"phases", phases},
                   {"producer_lead_us", lead_json}, {"starved_us", starved_json}, {"sms", sms},
                   {"ring_stages", ring_stages}, {"split_keys", split_keys}};
  const std::string path = out_dir + "/decode-layers-trace-" + qwen3::bench::utc_time(true) + "-p" + std::to_string(position) + "-b" +
                           std::to_string(bucket) + "-s" + std::to_string(ring_stages) + "-k" +
                           std::to_string(split_keys) + ".json";
  std::ofstream(path) << j.dump(2) << "\n";
  std::printf("wrote %s\n", path.c_str());
  return 0;
}
