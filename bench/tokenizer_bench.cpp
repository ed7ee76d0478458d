// Single-threaded encode throughput of our tokenizer on the parity corpus (one JSON string per line), for
// bench/tokenizer_bench.py, which runs it next to Hugging Face tokenizers and fastokens. Prints one JSON
// object: bytes and tokens per pass, the cold pass (empty piece cache) and the best and median of the warm
// passes, in MB/s (10^6 bytes per second). Usage: qwen3_tokenizer_bench TOKENIZER_JSON CORPUS_JSONL [PASSES]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "text/tokenizer.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s TOKENIZER_JSON CORPUS_JSONL [PASSES]\n", argv[0]);
    return 2;
  }
  try {
    const int passes = argc > 3 ? std::max(2, std::atoi(argv[3])) : 20;
    std::vector<std::string> corpus;
    std::ifstream in(argv[2]);
    std::string line;
    size_t bytes = 0;
    while (std::getline(in, line)) {
      corpus.push_back(nlohmann::json::parse(line).get<std::string>());
      bytes += corpus.back().size();
    }
    using clock = std::chrono::steady_clock;
    // CPU time of this thread: on a shared machine it is steadier than wall time (it leaves out time spent
    // descheduled); both are reported.
    auto thread_seconds = [] {
      timespec t;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
      return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
    };
    const auto load_start = clock::now();
    const qwen3::Tokenizer tokenizer = qwen3::Tokenizer::from_file(argv[1]);
    const double load_seconds = std::chrono::duration<double>(clock::now() - load_start).count();

    std::vector<int32_t> ids;
    ids.reserve(1 << 16);
    size_t tokens = 0;
    std::vector<double> seconds, cpu_seconds;
    for (int pass = 0; pass < passes; ++pass) {
      tokens = 0;
      const auto start = clock::now();
      const double cpu_start = thread_seconds();
      for (const std::string& text : corpus) {
        ids.clear();
        tokenizer.encode_into(text, ids);
        tokens += ids.size();
      }
      seconds.push_back(std::chrono::duration<double>(clock::now() - start).count());
      cpu_seconds.push_back(thread_seconds() - cpu_start);
    }
    const double cold = seconds.front();
    std::vector<double> warm(seconds.begin() + 1, seconds.end());
    std::sort(warm.begin(), warm.end());
    std::vector<double> warm_cpu(cpu_seconds.begin() + 1, cpu_seconds.end());
    std::sort(warm_cpu.begin(), warm_cpu.end());
    auto mb_per_s = [&](double s) { return double(bytes) / s / 1e6; };
    nlohmann::ordered_json result;
    result["bytes"] = bytes;
    result["strings"] = corpus.size();
    result["tokens"] = tokens;
    result["load_seconds"] = load_seconds;
    result["cold_mb_per_s"] = mb_per_s(cold);
    result["best_mb_per_s"] = mb_per_s(warm.front());
    result["median_mb_per_s"] = mb_per_s(warm[warm.size() / 2]);
    result["cpu_best_mb_per_s"] = mb_per_s(warm_cpu.front());
    result["cpu_median_mb_per_s"] = mb_per_s(warm_cpu[warm_cpu.size() / 2]);
    result["passes"] = passes;
    std::cout << result.dump() << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
