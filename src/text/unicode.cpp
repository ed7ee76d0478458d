#include "text/unicode.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

namespace qwen3::unicode {
namespace {

// Hangul syllables decompose and compose algorithmically (Unicode 3.12).
constexpr char32_t kHangulBase = 0xAC00, kLeadBase = 0x1100, kVowelBase = 0x1161, kTrailBase = 0x11A7;
constexpr char32_t kLeadCount = 19, kVowelCount = 21, kTrailCount = 28;
constexpr char32_t kSyllableCount = kLeadCount * kVowelCount * kTrailCount;

// The second byte of a sequence has a narrower range than 80..BF after some lead bytes (no overlongs, no
// surrogates, nothing past U+10FFFF); `sequence_length` 0 marks a byte that cannot start a sequence.
struct LeadByte {
  uint8_t sequence_length;
  uint8_t second_min, second_max;
};
inline LeadByte lead_byte(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Length of the well-formed sequence at p (1..4), or -(k) when only its first k bytes (k >= 1) form a maximal
// ill-formed subpart, or 0 when the first k bytes are a valid but truncated prefix that reaches `end`.
inline int classify_sequence(const unsigned char* p, const unsigned char* end, int& valid_prefix) {
  const LeadByte lead = lead_byte(p[0]);
  valid_prefix = 1;
  if (lead.sequence_length == 0) return -1;
  if (lead.sequence_length == 1) return 1;
  for (int k = 1; k < lead.sequence_length; ++k) {
    if (p + k >= end) return 0;
    const unsigned char lo = k == 1 ? lead.second_min : 0x80, hi = k == 1 ? lead.second_max : 0xBF;
    if (p[k] < lo || p[k] > hi) return -k;
    valid_prefix = k + 1;
  }
  return lead.sequence_length;
}

// The canonical compositions in an open-addressing table built once from the generated sorted list: a lookup
// is one or two probes instead of a binary search over 940 pairs.
class CompositionTable {
 public:
  CompositionTable() {
    for (size_t i = 0; i < detail::kCompositionCount; ++i) {
      const detail::CompositionPair& pair = detail::kCompositions[i];
      size_t slot = index(pair.key);
      while (entries_[slot].composite != 0) slot = (slot + 1) & (kSlots - 1);
      entries_[slot] = pair;
    }
  }
  char32_t find(uint64_t key) const {
    for (size_t slot = index(key);; slot = (slot + 1) & (kSlots - 1)) {
      const detail::CompositionPair& entry = entries_[slot];
      if (entry.key == key) return entry.composite;
      if (entry.composite == 0) return 0;
    }
  }

 private:
  static constexpr size_t kSlots = 4096;  // > 4 x the 940 pairs
  static size_t index(uint64_t key) { return size_t((key * 0x9E3779B97F4A7C15ull) >> 52); }
  std::array<detail::CompositionPair, kSlots> entries_{};
};

const CompositionTable& composition_table() {
  static const CompositionTable table;
  return table;
}

inline char32_t compose_pair(char32_t first, char32_t second) {
  if (first - kLeadBase < kLeadCount && second - kVowelBase < kVowelCount)
    return kHangulBase + ((first - kLeadBase) * kVowelCount + (second - kVowelBase)) * kTrailCount;
  if (first - kHangulBase < kSyllableCount && (first - kHangulBase) % kTrailCount == 0 &&
      second - kTrailBase - 1 < kTrailCount - 1)
    return first + (second - kTrailBase);
  return composition_table().find(uint64_t(first) << 21 | second);
}

struct Decomposed {
  char32_t cp;
  uint8_t combining_class;
};

// Canonical decomposition, canonical ordering and canonical composition of one region (UAX #15).
void normalize_region(std::string_view region, std::string& out) {
  thread_local std::vector<Decomposed> buffer;
  buffer.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(region.data());
  const auto* end = p + region.size();
  while (p < end) {
    size_t length;
    const char32_t cp = decode_valid_utf8(p, length);
    p += length;
    if (cp - kHangulBase < kSyllableCount) {
      const char32_t index = cp - kHangulBase;
      buffer.push_back({kLeadBase + index / (kVowelCount * kTrailCount), 0});
      buffer.push_back({kVowelBase + (index % (kVowelCount * kTrailCount)) / kTrailCount, 0});
      if (index % kTrailCount) buffer.push_back({kTrailBase + index % kTrailCount, 0});
      continue;
    }
    const detail::CodePointRecord& r = record(cp);
    if (r.decomposition_length == 0) {
      buffer.push_back({cp, r.combining_class});
      continue;
    }
    for (int i = 0; i < r.decomposition_length; ++i) {
      const char32_t part = detail::kDecompositions[r.decomposition_offset + i];
      buffer.push_back({part, record(part).combining_class});
    }
  }
  // Canonical ordering: a stable sort of each run of non-starters by combining class. Runs are short, so an
  // insertion sort (stable, and free of std::stable_sort's buffer allocation).
  for (size_t i = 1; i < buffer.size(); ++i) {
    const Decomposed c = buffer[i];
    if (c.combining_class == 0) continue;
    size_t j = i;
    while (j > 0 && buffer[j - 1].combining_class > c.combining_class) {
      buffer[j] = buffer[j - 1];
      --j;
    }
    buffer[j] = c;
  }
  // Canonical composition: a character joins the last starter unless something between them blocks it.
  size_t kept = 0;
  std::ptrdiff_t starter = -1;
  for (size_t i = 0; i < buffer.size(); ++i) {
    const Decomposed c = buffer[i];
    if (starter >= 0) {
      const bool adjacent = size_t(starter) + 1 == kept;
      const uint8_t previous_class = buffer[kept - 1].combining_class;
      if (adjacent || (previous_class != 0 && previous_class < c.combining_class)) {
        if (const char32_t composite = compose_pair(buffer[size_t(starter)].cp, c.cp)) {
          buffer[size_t(starter)].cp = composite;
          continue;
        }
      }
    }
    if (c.combining_class == 0) starter = std::ptrdiff_t(kept);
    buffer[kept++] = c;
  }
  for (size_t i = 0; i < kept; ++i) append_utf8(out, buffer[i].cp);
}

}  // namespace

uint8_t bmp_flags[0x10000];
namespace {
// The tables are constant-initialized, so they are ready before this dynamic initializer runs.
const bool bmp_flags_ready = [] {
  for (char32_t cp = 0; cp < 0x10000; ++cp) bmp_flags[cp] = record(cp).flags;
  return true;
}();
}  // namespace

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    const char bytes[2] = {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
    out.append(bytes, 2);
  } else if (cp < 0x10000) {
    const char bytes[3] = {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)),
                           char(0x80 | (cp & 0x3F))};
    out.append(bytes, 3);
  } else {
    const char bytes[4] = {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)),
                           char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
    out.append(bytes, 4);
  }
}

namespace {
template <bool kCheckNfc>
size_t find_invalid_utf8_impl(std::string_view bytes, size_t& first_nfc_candidate) {
  const auto* begin = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto* end = begin + bytes.size();
  const auto* p = begin;
  while (p < end) {
    // Eight ASCII bytes at a time: most text is mostly ASCII.
    if (end - p >= 8) {
      uint64_t word;
      std::memcpy(&word, p, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        p += 8;
        continue;
      }
    }
    int valid_prefix;
    const int length = classify_sequence(p, end, valid_prefix);
    if (length <= 0) return size_t(p - begin);
    if (kCheckNfc && length > 1 && first_nfc_candidate == std::string_view::npos) {
      size_t decoded_length;
      if (!(flags(decode_valid_utf8(p, decoded_length)) & kNfcBoundary))
        first_nfc_candidate = size_t(p - begin);
    }
    p += length;
  }
  return std::string_view::npos;
}
}  // namespace

size_t find_invalid_utf8(std::string_view bytes) {
  size_t unused;
  return find_invalid_utf8_impl<false>(bytes, unused);
}

size_t find_invalid_utf8(std::string_view bytes, size_t& first_nfc_candidate) {
  first_nfc_candidate = std::string_view::npos;
  return find_invalid_utf8_impl<true>(bytes, first_nfc_candidate);
}

size_t append_utf8_lossy(std::string& out, std::string_view bytes, bool final_chunk) {
  const auto* begin = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto* end = begin + bytes.size();
  const auto* p = begin;
  while (p < end) {
    int valid_prefix;
    const int length = classify_sequence(p, end, valid_prefix);
    if (length > 0) {
      out.append(reinterpret_cast<const char*>(p), size_t(length));
      p += length;
    } else if (length == 0) {  // a well-formed start cut off by the end of the bytes
      if (!final_chunk) break;
      append_utf8(out, kReplacementCharacter);
      p = end;
    } else {
      append_utf8(out, kReplacementCharacter);
      p += -length;
    }
  }
  return size_t(p - begin);
}

std::string_view to_nfc(std::string_view text, std::string& storage, size_t skip) {
  const auto* begin = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = std::min(skip, n);
  // Start of the latest character before which NFC cannot change anything: the last skipped one is a
  // boundary.
  size_t last_boundary = 0;
  if (i > 0) {
    last_boundary = i - 1;
    while (last_boundary > 0 && (begin[last_boundary] & 0xC0) == 0x80) --last_boundary;
  }
  size_t copied = 0;  // text[0, copied) is already in storage
  bool changed = false;
  while (i < n) {
    if (n - i >= 8) {
      uint64_t word;
      std::memcpy(&word, begin + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        i += 8;
        last_boundary = i - 1;
        continue;
      }
    }
    size_t length;
    const char32_t cp = decode_valid_utf8(begin + i, length);
    if (flags(cp) & kNfcBoundary) {
      last_boundary = i;
      i += length;
      continue;
    }
    // The region that NFC may change runs from the last boundary to the next one.
    size_t region_end = i + length;
    while (region_end < n) {
      const char32_t next = decode_valid_utf8(begin + region_end, length);
      if (flags(next) & kNfcBoundary) break;
      region_end += length;
    }
    if (!changed) {
      storage.clear();
      changed = true;
    }
    storage.append(text.substr(copied, last_boundary - copied));
    normalize_region(text.substr(last_boundary, region_end - last_boundary), storage);
    copied = region_end;
    i = region_end;
    last_boundary = region_end;
  }
  if (!changed) return text;
  storage.append(text.substr(copied));
  return storage;
}

}  // namespace qwen3::unicode
