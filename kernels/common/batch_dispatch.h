// Run-time batch size (1..8 activation rows) -> compile-time template argument, and the shape choices the decode
// GEMVs share, so every launcher instantiates the same kernels without its own eight-case switch.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace qwen3::kernels {

constexpr int kMaxBatchTokens = 8;

// Weight rows a warp computes for a batch of `tokens`: more rows per activation load as the batch grows, so each
// L1 activation load feeds several rows (at 8 tokens one row per warp would need 8 bytes of L1 traffic per weight
// byte).
constexpr int gemv_rows_for(int tokens) { return tokens == 1 ? 1 : (tokens <= 3 ? 2 : 4); }
// 16-byte chunks per row in flight per lane (double-buffered); halved when rows per warp reach 4 to fit registers.
constexpr int gemv_unroll_for(int tokens) { return tokens <= 3 ? 4 : 2; }
// Gate/up row pairs a warp computes (each pair is two rows).
constexpr int gemv_pairs_for(int tokens) { return tokens <= 3 ? 1 : 2; }

// Calls f(std::integral_constant<int, m>{}) for m in [1, kMaxBatchTokens]; throws naming `what` otherwise.
template <class F>
void dispatch_batch_tokens(int64_t m, const char* what, F&& f) {
  switch (m) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    case 3: f(std::integral_constant<int, 3>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 5: f(std::integral_constant<int, 5>{}); break;
    case 6: f(std::integral_constant<int, 6>{}); break;
    case 7: f(std::integral_constant<int, 7>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    default: throw std::invalid_argument(std::string(what) + ": m must be in [1, 8]");
  }
}

}  // namespace qwen3::kernels
