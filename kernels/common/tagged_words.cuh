// Tagged words: data handed between CTAs of one launch without a fence or a counter on the writer's side.
//
// Each 8-byte word holds a 32-bit payload (low half) and the tag of the launch that wrote it (high half). An aligned
// 8-byte access is single-copy atomic, so a reader that finds its launch's tag in a word also finds that word's
// payload: the word is its own flag. A writer stores and goes on (no __threadfence, no release, no count), and a
// reader polls the words it needs until each carries the tag. The price is twice the bytes and a tag that differs
// between any two launches that use the same words (a per-launch count: stale words carry an older tag).
// (NCCL's LL protocol hands data between GPUs the same way.)
//
// Vector accesses (v2.b64) are two such words each: each element is atomic on its own, which is all a reader needs.
// PRECOND: pointers 16-byte aligned; words read with these loads are written only with these stores.
#pragma once

#include <cstdint>

namespace qwen3::kernels {

__device__ __forceinline__ uint64_t tagged_word(uint32_t payload, uint32_t tag) {
  return (uint64_t(tag) << 32) | payload;
}
__device__ __forceinline__ uint32_t word_tag(uint64_t word) { return uint32_t(word >> 32); }
__device__ __forceinline__ uint32_t word_payload(uint64_t word) { return uint32_t(word); }

// Two tagged words, one 16-byte store, relaxed at GPU scope (to L2; no ordering with anything else).
__device__ __forceinline__ void store_tagged_pair(uint64_t* dst, uint32_t payload0, uint32_t payload1, uint32_t tag) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("st.relaxed.gpu.global.v2.b64 [%0], {%1, %2};" ::"l"(dst), "l"(tagged_word(payload0, tag)),
               "l"(tagged_word(payload1, tag))
               : "memory");
#endif
}

// Two tagged words, one 16-byte load, relaxed at GPU scope (from L2: no stale L1 line).
__device__ __forceinline__ void load_tagged_pair(const uint64_t* src, uint64_t& word0, uint64_t& word1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  asm volatile("ld.relaxed.gpu.global.v2.b64 {%0, %1}, [%2];" : "=l"(word0), "=l"(word1) : "l"(src));
#endif
}

// kPairs pairs polled together: each round reloads every wanted pair (bit i of wanted: src[i], words[i]) that does
// not carry tag yet, all those loads in flight at once, so a thread waits one round trip after its last word lands
// rather than one a stale pair in turn. words hold a first load of each wanted pair. A tag that never comes is a
// bug (a writer that skipped its words, or a grid that is not all resident), not a state: trap after 2^24 rounds
// (seconds) instead of hanging the GPU.
template <int kPairs>
__device__ __forceinline__ void await_tagged_pairs(const uint64_t* const (&src)[kPairs], uint64_t (&words)[kPairs][2],
                                                   uint32_t wanted, uint32_t tag) {
  static_assert(kPairs <= 32, "a bit of wanted a pair");
  uint32_t polls = 0;
  for (;;) {
    uint32_t stale = 0;
#pragma unroll
    for (int i = 0; i < kPairs; ++i)
      if ((wanted >> i & 1u) && (word_tag(words[i][0]) != tag || word_tag(words[i][1]) != tag)) stale |= 1u << i;
    if (stale == 0) return;
    if (++polls > (1u << 24)) __trap();
#pragma unroll
    for (int i = 0; i < kPairs; ++i)
      if (stale >> i & 1u) load_tagged_pair(src[i], words[i][0], words[i][1]);
  }
}

}  // namespace qwen3::kernels
