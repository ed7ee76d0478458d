// Unicode pieces the tokenizer needs, with the exact semantics of Hugging Face `tokenizers` 0.23.2: UTF-8
// validation and lossy decoding as Rust does it, NFC as its normalizer does it (Unicode 9.0 data), and the
// character classes its regex engine uses (Unicode 16.0). Tables come from scripts/gen_unicode_tables.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace qwen3::unicode {

// Per-code-point property bits.
enum : uint8_t {
  kLetter = 1,        // \p{L}
  kNumber = 2,        // \p{N}
  kWhiteSpace = 4,    // \s, White_Space (also Rust's char::is_whitespace)
  kWord = 8,          // \w of Rust's regex crate (Alphabetic, M, Nd, Pc, Join_Control)
  kNfcBoundary = 16,  // NFC never changes text across the position before this character (ccc 0, NFC_QC=Yes)
};

namespace detail {
struct CodePointRecord {
  uint8_t flags;
  uint8_t combining_class;        // canonical combining class (Unicode 9.0; 0 for later characters)
  uint8_t decomposition_length;   // 0: no canonical decomposition
  uint16_t decomposition_offset;  // into kDecompositions: the full (recursive) canonical decomposition
};
struct CompositionPair {
  uint64_t key;  // first << 21 | second
  uint32_t composite;
};
inline constexpr int kBlockBits = 7;
extern const uint16_t kStage1[];
extern const uint16_t kStage2[];
extern const CodePointRecord kRecords[];
extern const uint32_t kDecompositions[];
extern const CompositionPair kCompositions[];
extern const size_t kCompositionCount;
}  // namespace detail

inline constexpr char32_t kReplacementCharacter = 0xFFFD;

// PRECOND: cp <= 0x10FFFF.
inline const detail::CodePointRecord& record(char32_t cp) {
  using namespace detail;
  return kRecords[kStage2[(size_t(kStage1[cp >> kBlockBits]) << kBlockBits) |
                          (cp & ((1u << kBlockBits) - 1))]];
}
// Flags of the Basic Multilingual Plane in one flat array (filled from the tables at start-up): one load
// instead of three for nearly every character of real text.
extern uint8_t bmp_flags[0x10000];
inline uint8_t flags(char32_t cp) {
  return cp < 0x10000 ? bmp_flags[cp] : record(cp).flags;
}

// Decodes one code point of *valid* UTF-8 at p (the caller validated the text); sets `length` to its byte
// count.
inline char32_t decode_valid_utf8(const unsigned char* p, size_t& length) {
  const unsigned char b = p[0];
  if (b < 0x80) {
    length = 1;
    return b;
  }
  if (b < 0xE0) {
    length = 2;
    return char32_t(b & 0x1F) << 6 | (p[1] & 0x3F);
  }
  if (b < 0xF0) {
    length = 3;
    return char32_t(b & 0x0F) << 12 | char32_t(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
  }
  length = 4;
  return char32_t(b & 0x07) << 18 | char32_t(p[1] & 0x3F) << 12 | char32_t(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
}

void append_utf8(std::string& out, char32_t cp);

// Byte offset of the first byte that does not start a well-formed UTF-8 sequence, or npos when all is valid
// (overlong forms, surrogates and code points past U+10FFFF are invalid, as in Rust's str).
size_t find_invalid_utf8(std::string_view bytes);
// The same, also finding the first character that is not an NFC boundary (npos when there is none: NFC then
// leaves the text as it is).
size_t find_invalid_utf8(std::string_view bytes, size_t& first_nfc_candidate);

// Appends `bytes` as text the way Rust's String::from_utf8_lossy does: each maximal ill-formed subpart
// becomes one U+FFFD. With `final_chunk` false, a well-formed but incomplete sequence at the very end is left
// unconsumed so a stream can complete it later. Returns the number of bytes consumed.
size_t append_utf8_lossy(std::string& out, std::string_view bytes, bool final_chunk = true);

// NFC of valid UTF-8 text. Returns `text` itself when it is already NFC (the common case, found without
// copying); otherwise writes the normalized text into `storage` and returns a view of it.
// `skip` bytes at the start are known to hold only NFC boundary characters (see find_invalid_utf8).
std::string_view to_nfc(std::string_view text, std::string& storage, size_t skip = 0);

}  // namespace qwen3::unicode
