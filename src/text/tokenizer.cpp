#include "text/tokenizer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "text/unicode.h"

namespace qwen3 {
namespace {

using json = nlohmann::json;

// The pre-tokenizer patterns the hand scanner implements: Qwen2/Qwen3's, and the same with digits grouped by
// up to three (Llama 3's), which differ only in `\p{N}` vs `\p{N}{1,3}`.
constexpr std::string_view kQwenPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kDigitTriplesPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Pieces longer than this are merged every time rather than cached. HF stops at 256 characters; we keep
// pieces up to 4 KiB (long CJK runs, emoji sequences, separator lines), because a chat re-encodes its whole
// history every turn, so even long pieces come back, and merging them is the slowest part of encoding.
constexpr size_t kMaxCachedPieceBytes = 4096;
// Lines (see encode_lines) of this many bytes are cached whole: shorter ones gain little over their pieces'
// cache, longer ones are rarely repeated.
constexpr size_t kMinCachedLineBytes = 16, kMaxCachedLineBytes = 4096;
// Pieces up to this many bytes are merged with a simple quadratic scan, longer ones through a heap.
constexpr size_t kMaxQuadraticPieceBytes = 48;
constexpr uint32_t kNoMerge = UINT32_MAX;

__extension__ typedef unsigned __int128 uint128;  // __extension__: GCC and Clang have it, ISO C++ does not

inline uint64_t load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint64_t load32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
// 64x64 -> 128-bit multiply, folded: the mixing step of wyhash-style hashes.
inline uint64_t fold_multiply(uint64_t a, uint64_t b) {
  const uint128 product = uint128(a) * b;
  return uint64_t(product) ^ uint64_t(product >> 64);
}

// A fast hash of short byte strings (most pieces are under 16 bytes). Reads only inside [p, p + n): short
// lengths use overlapping loads rather than a variable-length copy.
inline uint64_t hash_bytes(const unsigned char* p, size_t n) {
  constexpr uint64_t k0 = 0xA0761D6478BD642Full, k1 = 0xE7037ED1A0B428DBull, k2 = 0x8EBC6AF09C88C6E3ull;
  uint64_t a, b, seed = k0 ^ n;
  if (n <= 16) {
    if (n >= 8) {
      a = load64(p);
      b = load64(p + n - 8);
    } else if (n >= 4) {
      a = load32(p);
      b = load32(p + n - 4);
    } else if (n > 0) {
      a = uint64_t(p[0]) << 16 | uint64_t(p[n >> 1]) << 8 | p[n - 1];
      b = 0;
    } else {
      a = b = 0;
    }
  } else {
    size_t i = 0;
    for (; i + 16 < n; i += 16) seed = fold_multiply(load64(p + i) ^ k1, load64(p + i + 8) ^ seed);
    a = load64(p + n - 16);
    b = load64(p + n - 8);
  }
  return fold_multiply(k1 ^ n, fold_multiply(a ^ k1, b ^ seed) ^ k2);
}

inline size_t capacity_for(size_t count) {
  size_t capacity = 16;
  while (capacity < count * 2) capacity <<= 1;
  return capacity;
}

// Byte strings -> id, open addressing; keys live in one arena.
class BytesToId {
 public:
  void build(const std::vector<std::pair<std::string, int32_t>>& entries) {
    slots_.assign(capacity_for(entries.size()), Slot{});
    mask_ = slots_.size() - 1;
    for (const auto& [bytes, id] : entries) insert(bytes, id);
  }
  // Returns false when the key was already present (the id is then left unchanged).
  bool insert(std::string_view bytes, int32_t id) {
    const uint64_t h = hash_bytes(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = {h, uint32_t(arena_.size()), uint32_t(bytes.size()), id};
        arena_.append(bytes);
        return true;
      }
      if (s.hash == h && key(s) == bytes) return false;
    }
  }
  int32_t find(const unsigned char* p, size_t n) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash_bytes(p, n);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.hash == h && s.length == n && std::memcmp(arena_.data() + s.offset, p, n) == 0) return s.id;
    }
  }
  int32_t find(std::string_view bytes) const {
    return find(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0, length = 0;
    int32_t id = -1;
  };
  std::string_view key(const Slot& s) const { return std::string_view(arena_).substr(s.offset, s.length); }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  std::string arena_;
};

// (left id, right id) -> (rank, merged id), open addressing on the packed pair; key and value share a 16-byte
// entry so that a lookup touches one cache line.
class MergeTable {
 public:
  struct Merge {
    uint32_t rank = kNoMerge;
    int32_t merged = -1;
  };
  void reserve(size_t count) {
    size_t capacity = 16;
    while (capacity < count + count / 2) capacity <<= 1;  // load <= 2/3
    entries_.assign(capacity, Entry{});
    mask_ = capacity - 1;
  }
  // A later duplicate replaces an earlier one, as in HF (its merges become a HashMap).
  void insert(int32_t left, int32_t right, uint32_t rank, int32_t merged) {
    const uint64_t key = pack(left, right);
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      if (entries_[i].key == kEmpty || entries_[i].key == key) {
        entries_[i] = {key, {rank, merged}};
        return;
      }
    }
  }
  Merge find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    for (size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.key == key) return e.merge;
      if (e.key == kEmpty) return {};
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);
  struct Entry {
    uint64_t key = kEmpty;
    Merge merge;
  };
  static uint64_t pack(int32_t left, int32_t right) {
    return uint64_t(uint32_t(left)) << 32 | uint32_t(right);
  }
  static uint64_t mix(uint64_t key) {
    key *= 0x9E3779B97F4A7C15ull;
    return key ^ (key >> 29);
  }
  std::vector<Entry> entries_;
  size_t mask_ = 0;
};

// GPT-2's byte <-> printable character table: bytes that are printable Latin-1 stand for themselves, the
// others are shifted to U+0100 and up, in byte order.
struct ByteLevelAlphabet {
  std::array<char32_t, 256> char_of_byte{};
  std::array<int16_t, 324> byte_of_char{};  // every character of the alphabet is below U+0144
  ByteLevelAlphabet() {
    byte_of_char.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char_of_byte[size_t(b)] = printable ? char32_t(b) : next++;
      byte_of_char[char_of_byte[size_t(b)]] = int16_t(b);
    }
  }
  // The bytes a token spelled in the alphabet stands for; nullopt when it has a character outside it.
  std::optional<std::string> to_bytes(std::string_view spelling) const {
    std::string bytes;
    const auto* p = reinterpret_cast<const unsigned char*>(spelling.data());
    const auto* end = p + spelling.size();
    while (p < end) {
      size_t length;
      const char32_t c = unicode::decode_valid_utf8(p, length);
      p += length;
      if (c >= byte_of_char.size() || byte_of_char[c] < 0) return std::nullopt;
      bytes.push_back(char(byte_of_char[c]));
    }
    return bytes;
  }
  std::string to_spelling(std::string_view bytes) const {
    std::string spelling;
    for (unsigned char b : bytes) unicode::append_utf8(spelling, char_of_byte[b]);
    return spelling;
  }
};

const ByteLevelAlphabet& byte_level() {
  static const ByteLevelAlphabet alphabet;
  return alphabet;
}

// Character classes of the pre-tokenizer pattern.
enum CharClass : uint8_t { kClassLetter, kClassNumber, kClassSpace, kClassNewline, kClassOther };

constexpr std::array<uint8_t, 128> make_ascii_classes() {
  std::array<uint8_t, 128> classes{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      classes[size_t(c)] = kClassLetter;
    } else if (c >= '0' && c <= '9') {
      classes[size_t(c)] = kClassNumber;
    } else if (c == '\r' || c == '\n') {
      classes[size_t(c)] = kClassNewline;
    } else if (c == ' ' || c == '\t' || c == '\v' || c == '\f') {
      classes[size_t(c)] = kClassSpace;
    } else {
      classes[size_t(c)] = kClassOther;
    }
  }
  return classes;
}
constexpr std::array<uint8_t, 128> kAsciiClasses = make_ascii_classes();

struct ClassedChar {
  uint8_t cls;
  uint8_t length;
};

// Eight bytes at a time (SWAR): bit 7 of each byte of the result is set where the byte is an ASCII letter.
inline uint64_t ascii_letter_bits(uint64_t word) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  const uint64_t folded = (word & ~kHigh) | (0x20 * kOnes);             // ASCII part, lower-cased
  const uint64_t at_least_a = (folded + (0x80 - 'a') * kOnes) & kHigh;  // byte >= 'a' (no carry: byte < 0x80)
  const uint64_t past_z = (folded + (0x80 - 'z' - 1) * kOnes) & kHigh;  // byte > 'z'
  return at_least_a & ~past_z & ~word & kHigh;                          // and not a non-ASCII byte
}

// End of the run of ASCII letters starting at j, eight bytes at a time; stops before any other byte (a
// non-ASCII letter is left to the caller).
inline size_t ascii_letters_end(const unsigned char* s, size_t j, size_t n) {
  while (j + 8 <= n) {
    const uint64_t stops = ~ascii_letter_bits(load64(s + j)) & 0x8080808080808080ull;
    if (stops) return j + size_t(__builtin_ctzll(stops) >> 3);
    j += 8;
  }
  while (j < n && s[j] < 0x80 && kAsciiClasses[s[j]] == kClassLetter) ++j;
  return j;
}

// End of the run of ' ' starting at j, eight bytes at a time.
inline size_t spaces_end(const unsigned char* s, size_t j, size_t n) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  while (j + 8 <= n) {
    const uint64_t x = load64(s + j) ^ (uint64_t(' ') * kOnes);    // zero bytes where there is a space
    const uint64_t stops = (((x & ~kHigh) + ~kHigh) | x) & kHigh;  // bit 7 set where the byte is not zero
    if (stops) return j + size_t(__builtin_ctzll(stops) >> 3);
    j += 8;
  }
  while (j < n && s[j] == ' ') ++j;
  return j;
}

// PRECOND: i < n, s valid UTF-8.
[[gnu::always_inline]] inline ClassedChar classify(const unsigned char* s, size_t i) {
  if (s[i] < 0x80) return {kAsciiClasses[s[i]], 1};
  size_t length;
  const char32_t cp = unicode::decode_valid_utf8(s + i, length);
  const uint8_t f = unicode::flags(cp);
  const uint8_t cls = (f & unicode::kLetter)       ? kClassLetter
                      : (f & unicode::kNumber)     ? kClassNumber
                      : (f & unicode::kWhiteSpace) ? kClassSpace
                                                   : kClassOther;
  return {cls, uint8_t(length)};
}

inline bool is_white_space_at(std::string_view s, size_t i, size_t& length) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const char32_t cp = unicode::decode_valid_utf8(p + i, length);
  return unicode::flags(cp) & unicode::kWhiteSpace;
}

// Start of the code point that ends at `end` (exclusive). PRECOND: end > 0, valid UTF-8.
inline size_t previous_char_start(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

// Cached ids of recently seen pieces, one cache per thread (so encode stays const and lock-free). A slot is
// half a cache line holding a short piece and its ids inline, so a hit costs one memory access; longer pieces
// keep their bytes and ids in arenas. It grows up to kMaxSlots and starts over when that fills.
class PieceCache {
  // PRECOND: n <= kInlineBytes and `key` has kInlineBytes readable bytes. Overlapping loads, as in
  // hash_bytes.
  static bool same_short_key(const unsigned char* key, const unsigned char* p, size_t n) {
    if (n >= 8) return load64(key) == load64(p) && load64(key + n - 8) == load64(p + n - 8);
    if (n >= 4) return load32(key) == load32(p) && load32(key + n - 4) == load32(p + n - 4);
    for (size_t i = 0; i < n; ++i)
      if (key[i] != p[i]) return false;
    return true;
  }

 public:
  static constexpr size_t kInlineBytes = 12, kInlineIds = 3;
  // Bytes of keys and ids kept in the arenas before the cache starts over, so memory stays bounded.
  static constexpr size_t kMaxArenaBytes = size_t(64) << 20;
  static constexpr size_t kMinSlots = size_t(1) << 12, kMaxSlots = size_t(1) << 19;

  // Returns the cached ids of a piece or nullptr.
  const int32_t* find(const unsigned char* p, size_t n, uint64_t h, size_t& count) const {
    if (slots_.empty()) return nullptr;
    const size_t mask = slots_.size() - 1;
    const uint32_t tag = uint32_t(h >> 32);
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.length == 0) return nullptr;
      if (s.tag != tag || s.length != n) continue;
      if (s.is_inline()) {
        if (!same_short_key(reinterpret_cast<const unsigned char*>(s.key), p, n)) continue;
        count = s.id_count;
        return s.ids;
      }
      if (std::memcmp(keys_.data() + s.ids[0], p, n) != 0) continue;
      count = s.id_count;
      return ids_.data() + s.ids[1];
    }
  }
  void insert(const unsigned char* p, size_t n, uint64_t h, const int32_t* ids, size_t count) {
    if ((entries_ + 1) * 2 > slots_.size() || keys_.size() + ids_.size() * sizeof(int32_t) > kMaxArenaBytes) {
      if (slots_.size() >= kMaxSlots || keys_.size() + ids_.size() * sizeof(int32_t) > kMaxArenaBytes) {
        clear();
      } else {
        grow();
      }
    }
    Slot slot;
    slot.tag = uint32_t(h >> 32);
    slot.length = uint16_t(n);
    slot.id_count = uint16_t(count);
    if (slot.is_inline()) {
      std::memcpy(slot.key, p, n);
      std::copy(ids, ids + count, slot.ids);
    } else {
      slot.ids[0] = int32_t(keys_.size());
      slot.ids[1] = int32_t(ids_.size());
      keys_.append(reinterpret_cast<const char*>(p), n);
      ids_.insert(ids_.end(), ids, ids + count);
    }
    place(slot, h);
    ++entries_;
  }
  // The hot table: direct-mapped, for pieces of 2..8 bytes with at most 2 ids, small enough to stay in L2.
  // Most pieces of ordinary text (" the", "    ", "):") are answered here without touching the main table.
  static constexpr size_t kHotMaxBytes = 8, kHotMaxIds = 2;
  // The bytes of a piece of 2..8 bytes as one integer: with the length it identifies the piece (the loads
  // overlap when n < 8, but given n every byte is still in it).
  static uint64_t hot_key(const unsigned char* p, size_t n) {
    if (n >= 4) return load32(p) | load32(p + n - 4) << 32;
    return uint64_t(p[0]) | uint64_t(p[n >> 1]) << 8 | uint64_t(p[n - 1]) << 16;
  }
  bool find_hot(uint64_t key, size_t n, int32_t* ids, uint8_t& count) const {
    const HotSlot& slot = hot_[hot_index(key, n)];
    if (slot.key != key || ((slot.packed >> 48) & 0xF) != n) return false;
    count = uint8_t(slot.packed >> 52);
    ids[0] = int32_t(slot.packed & 0xFFFFFF);
    ids[1] = int32_t((slot.packed >> 24) & 0xFFFFFF);
    return true;
  }
  void insert_hot(uint64_t key, size_t n, const int32_t* ids, size_t count) {
    const uint64_t second = count > 1 ? uint64_t(ids[1]) : 0;
    hot_[hot_index(key, n)] = {key,
                               uint64_t(ids[0]) | second << 24 | uint64_t(n) << 48 | uint64_t(count) << 52};
  }
  void prefetch_hot(uint64_t key, size_t n) const { __builtin_prefetch(&hot_[hot_index(key, n)]); }
  void prefetch(uint64_t h) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[h & (slots_.size() - 1)]);
  }
  // The cache belongs to one tokenizer at a time.
  void bind(uint64_t owner) {
    if (owner_ != owner) {
      clear();
      owner_ = owner;
    }
  }

 private:
  struct alignas(32) Slot {
    uint32_t tag = 0;  // high hash bits, to reject most other pieces without reading their bytes
    uint16_t length = 0, id_count = 0;  // length 0: empty (pieces are never empty)
    char key[kInlineBytes] = {};        // zero-padded
    int32_t ids[kInlineIds] = {};       // or, for an arena entry: key offset, ids offset
    bool is_inline() const { return length <= kInlineBytes && id_count <= kInlineIds; }
  };
  static_assert(sizeof(Slot) == 32);
  struct HotSlot {  // 16 bytes: ids (below 2^24, as every id is) packed with the length and the id count
    uint64_t key = 0;
    uint64_t packed = 0;  // ids[0] | ids[1] << 24 | length << 48 | count << 52; 0: empty
  };
  static constexpr int kHotBits = 15;
  static size_t hot_index(uint64_t key, size_t n) {
    return size_t(((key ^ n) * 0x9E3779B97F4A7C15ull) >> (64 - kHotBits));
  }
  static_assert(kMaxCachedPieceBytes <= UINT16_MAX, "a slot stores a piece's length and id count in 16 bits");
  void place(const Slot& slot, uint64_t h) {
    const size_t mask = slots_.size() - 1;
    size_t i = h & mask;
    while (slots_[i].length != 0) i = (i + 1) & mask;
    slots_[i] = slot;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(std::max(kMinSlots, old.size() * 2), Slot{});
    for (const Slot& slot : old) {
      if (slot.length == 0) continue;
      const char* key = slot.is_inline() ? slot.key : keys_.data() + slot.ids[0];
      place(slot, hash_bytes(reinterpret_cast<const unsigned char*>(key), slot.length) | 1);
    }
  }
  void clear() {
    hot_.assign(size_t(1) << kHotBits, HotSlot{});
    slots_.assign(kMinSlots, Slot{});
    keys_.clear();
    ids_.clear();
    entries_ = 0;
  }
  std::vector<HotSlot> hot_ = std::vector<HotSlot>(size_t(1) << kHotBits);
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t entries_ = 0;
  uint64_t owner_ = 0;
};

std::atomic<uint64_t> next_tokenizer_serial{1};

// The added tokens of one trie (raw or normalized), found leftmost-longest as HF's Aho-Corasick does.
struct AddedMatcher {
  struct Pattern {
    std::string text;
    size_t token;  // index into added tokens
  };
  std::array<std::vector<Pattern>, 256> by_first_byte;  // longest first
  std::array<bool, 256> starts{};                       // whether some pattern starts with this byte
  int only_start = -1;                                  // the one first byte of all patterns, if there is one
  bool empty = true;

  void add(std::string text, size_t token) {
    if (text.empty()) return;
    auto& list = by_first_byte[static_cast<unsigned char>(text[0])];
    const unsigned char first = static_cast<unsigned char>(text[0]);
    only_start = empty || only_start == first ? first : -2;
    starts[first] = true;
    list.push_back({std::move(text), token});
    std::stable_sort(list.begin(), list.end(),
                     [](const Pattern& a, const Pattern& b) { return a.text.size() > b.text.size(); });
    empty = false;
  }
  // The longest pattern starting at `i`, or nullptr.
  const Pattern* match_at(std::string_view s, size_t i) const {
    for (const Pattern& p : by_first_byte[static_cast<unsigned char>(s[i])]) {
      if (s.size() - i >= p.text.size() && std::memcmp(s.data() + i, p.text.data(), p.text.size()) == 0)
        return &p;
    }
    return nullptr;
  }
};

std::string read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw InputError("tokenizer file " + path.string() + " does not exist");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open " + path.string());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return std::move(buffer).str();
}

}  // namespace

struct Tokenizer::Impl {
  std::string origin;
  uint64_t serial = next_tokenizer_serial.fetch_add(1);

  // Model.
  BytesToId bytes_to_id;  // regular tokens, by their bytes
  MergeTable merges;
  std::array<int32_t, 256> byte_to_id{};
  bool ignore_merges = false;
  int max_digits = 1;  // 1: \p{N}; 3: \p{N}{1,3}
  bool nfc = false;

  // Decoding: every id's bytes in one arena.
  std::vector<uint32_t> token_offsets;  // vocab_size + 1 entries
  std::string token_arena;
  std::vector<uint8_t> has_token;
  std::vector<uint8_t> special;

  // Added tokens.
  std::vector<AddedToken> added;
  AddedMatcher raw_matcher, normalized_matcher;
  BytesToId added_by_content;

  FormatError format_error(const std::string& what) const { return FormatError(origin + ": " + what); }

  // ---- Pre-tokenizer: the pattern's alternatives, tried in order at `i` as a backtracking regex engine
  // would.
  [[gnu::always_inline]] size_t piece_end(const unsigned char* s, size_t i, size_t n) const {
    // (?i:'s|'t|'re|'ve|'m|'ll|'d); under Unicode case folding U+017F (long s) also matches s.
    if (s[i] == '\'' && i + 1 < n) {
      auto lower = [](unsigned char c) { return (c >= 'A' && c <= 'Z') ? (c | 0x20) : c; };
      const unsigned char a = lower(s[i + 1]);
      if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
      if (s[i + 1] == 0xC5 && i + 2 < n && s[i + 2] == 0xBF) return i + 3;
      if (i + 2 < n) {
        const unsigned char b = lower(s[i + 2]);
        if ((a == 'r' || a == 'v') && b == 'e') return i + 3;
        if (a == 'l' && b == 'l') return i + 3;
      }
    }
    const ClassedChar c0 = classify(s, i);
    auto letters_end = [&](size_t j) {
      j = ascii_letters_end(s, j, n);
      while (j < n) {
        const ClassedChar c = classify(s, j);
        if (c.cls != kClassLetter) break;
        j += c.length;
      }
      return j;
    };
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (c0.cls == kClassLetter) return letters_end(i + c0.length);
    if (c0.cls != kClassNumber && c0.cls != kClassNewline && i + c0.length < n &&
        classify(s, i + c0.length).cls == kClassLetter)
      return letters_end(i + c0.length);
    // \p{N} or \p{N}{1,3}
    if (c0.cls == kClassNumber) {
      size_t j = i + c0.length;
      for (int count = 1; count < max_digits && j < n; ++count) {
        const ClassedChar c = classify(s, j);
        if (c.cls != kClassNumber) break;
        j += c.length;
      }
      return j;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*
    {
      size_t j = s[i] == ' ' ? i + 1 : i;
      if (j < n && classify(s, j).cls == kClassOther) {
        while (j < n) {
          const ClassedChar c = classify(s, j);
          if (c.cls != kClassOther) break;
          j += c.length;
        }
        while (j < n && (s[j] == '\r' || s[j] == '\n')) ++j;
        return j;
      }
    }
    // Only white space is left: \s*[\r\n]+ | \s+(?!\S) | \s+
    size_t j = i;
    size_t after_last_newline = 0;
    size_t last_char_start = i;
    size_t count = 0;
    if (s[i] == ' ') {  // runs of plain spaces (indentation) eight at a time
      j = spaces_end(s, i, n);
      count = j - i;
      last_char_start = j - 1;
    }
    while (j < n) {
      const ClassedChar c = classify(s, j);
      if (c.cls != kClassSpace && c.cls != kClassNewline) break;
      if (c.cls == kClassNewline) after_last_newline = j + 1;
      last_char_start = j;
      j += c.length;
      ++count;
    }
    if (after_last_newline) return after_last_newline;  // \s*[\r\n]+ ends at the run's last \r or \n
    if (j == n || count == 1) return j;                 // \s+(?!\S) at the end, or \s+ for a lone space
    return last_char_start;                             // \s+(?!\S) leaves the last space to the next piece
  }

  // ---- BPE.
  void merge_small(int32_t* ids, size_t n, std::vector<int32_t>& out) const {
    std::array<MergeTable::Merge, kMaxQuadraticPieceBytes> pairs;
    for (size_t i = 0; i + 1 < n; ++i) pairs[i] = merges.find(ids[i], ids[i + 1]);
    while (n > 1) {
      size_t best = 0;
      for (size_t i = 1; i + 1 < n; ++i)
        if (pairs[i].rank < pairs[best].rank) best = i;
      if (pairs[best].rank == kNoMerge) break;
      ids[best] = pairs[best].merged;
      for (size_t i = best + 1; i + 1 < n; ++i) ids[i] = ids[i + 1];
      for (size_t i = best; i + 2 < n; ++i) pairs[i] = pairs[i + 1];
      --n;
      if (best > 0) pairs[best - 1] = merges.find(ids[best - 1], ids[best]);
      if (best + 1 < n) pairs[best] = merges.find(ids[best], ids[best + 1]);
    }
    out.insert(out.end(), ids, ids + n);
  }

  // A pending merge. It remembers the pair it was made for, so a stale one (a side merged away since) is
  // recognized without another table lookup.
  struct Candidate {
    uint64_t order;  // rank << 32 | position: lowest rank first, then leftmost
    int32_t left, right, merged;
  };

  // A radix heap: pops in order in amortized O(1) with sequential memory access, but only while pushes never
  // go below the last pop. That holds when every merge's tokens were created by earlier merges (true of
  // trained BPE files, Qwen's included); push() reports a table where it does not.
  struct RadixQueue {
    std::array<std::vector<Candidate>, 65> buckets;  // bucket b: keys differing from `last` first at bit b-1
    uint64_t last = 0;
    size_t size = 0;
    static size_t bucket(uint64_t key, uint64_t last) {
      return key == last ? 0 : size_t(64 - __builtin_clzll(key ^ last));
    }
    void clear() {
      for (auto& b : buckets) b.clear();
      last = 0;
      size = 0;
    }
    bool push(const Candidate& c) {
      if (c.order < last) return false;
      buckets[bucket(c.order, last)].push_back(c);
      ++size;
      return true;
    }
    void build() {}
    bool empty() const { return size == 0; }
    Candidate pop() {
      if (buckets[0].empty()) {
        size_t i = 1;
        while (buckets[i].empty()) ++i;
        uint64_t smallest = UINT64_MAX;
        for (const Candidate& c : buckets[i]) smallest = std::min(smallest, c.order);
        last = smallest;
        for (const Candidate& c : buckets[i]) buckets[bucket(c.order, last)].push_back(c);  // all go below i
        buckets[i].clear();
      }
      const Candidate c = buckets[0].back();
      buckets[0].pop_back();
      --size;
      return c;
    }
  };

  // A binary min-heap: any merge table.
  struct HeapQueue {
    std::vector<Candidate> heap;
    static bool later(const Candidate& a, const Candidate& b) { return a.order > b.order; }
    void clear() { heap.clear(); }
    bool push(const Candidate& c) {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), later);
      return true;
    }
    void build() { std::make_heap(heap.begin(), heap.end(), later); }
    bool empty() const { return heap.empty(); }
    Candidate pop() {
      std::pop_heap(heap.begin(), heap.end(), later);
      const Candidate c = heap.back();
      heap.pop_back();
      return c;
    }
  };

  // BPE of a long piece: a linked list of symbols and a priority queue of candidate merges. Returns false,
  // with `ids` partly merged, when the queue refuses a push.
  template <typename Queue>
  bool merge_with_queue(Queue& queue, int32_t* ids, size_t n, std::vector<int32_t>& out) const {
    thread_local std::vector<int32_t> previous, next;
    previous.resize(n);
    next.resize(n);
    for (size_t i = 0; i < n; ++i) {
      previous[i] = int32_t(i) - 1;
      next[i] = i + 1 < n ? int32_t(i + 1) : -1;
    }
    queue.clear();
    auto candidate = [&](int32_t position, int32_t right_position) {
      const MergeTable::Merge m = merges.find(ids[position], ids[right_position]);
      if (m.rank == kNoMerge) return true;
      return queue.push(
          {uint64_t(m.rank) << 32 | uint32_t(position), ids[position], ids[right_position], m.merged});
    };
    for (size_t i = 0; i + 1 < n; ++i) candidate(int32_t(i), int32_t(i + 1));
    queue.build();
    while (!queue.empty()) {
      const Candidate top = queue.pop();
      const int32_t left = int32_t(uint32_t(top.order));
      const int32_t right = next[size_t(left)];
      if (right < 0 || ids[left] != top.left || ids[right] != top.right) continue;  // stale
      ids[left] = top.merged;
      ids[right] = -1;
      next[size_t(left)] = next[size_t(right)];
      if (next[size_t(left)] >= 0) previous[size_t(next[size_t(left)])] = left;
      if (previous[size_t(left)] >= 0 && !candidate(previous[size_t(left)], left)) return false;
      if (next[size_t(left)] >= 0 && !candidate(left, next[size_t(left)])) return false;
    }
    for (int32_t i = 0; i >= 0; i = next[size_t(i)]) out.push_back(ids[i]);
    return true;
  }

  void merge_large(int32_t* ids, size_t n, std::vector<int32_t>& out) const {
    thread_local RadixQueue radix;
    thread_local HeapQueue heap;
    thread_local std::vector<int32_t> original;
    original.assign(ids, ids + n);
    if (merge_with_queue(radix, ids, n, out)) return;
    std::copy(original.begin(), original.end(), ids);  // a merge table out of order: start over with a heap
    merge_with_queue(heap, ids, n, out);
  }

  void bpe(const unsigned char* p, size_t n, std::vector<int32_t>& out) const {
    if (ignore_merges) {
      const int32_t id = bytes_to_id.find(p, n);
      if (id >= 0) {
        out.push_back(id);
        return;
      }
    }
    thread_local std::vector<int32_t> ids;
    ids.resize(n);
    for (size_t i = 0; i < n; ++i) ids[i] = byte_to_id[p[i]];
    if (n <= kMaxQuadraticPieceBytes) {
      merge_small(ids.data(), n, out);
    } else {
      merge_large(ids.data(), n, out);
    }
  }

  // PRECOND: 1 < n <= kMaxCachedPieceBytes, h = cache_hash(p, n).
  void encode_cached_piece(const unsigned char* p, size_t n, uint64_t h, std::vector<int32_t>& out,
                           PieceCache& cache) const {
    size_t count;
    if (const int32_t* ids = cache.find(p, n, h, count)) {
      const size_t old_size = out.size();
      out.resize(old_size + count);  // a plain loop: memmove's call costs more than copying a few ids
      for (size_t k = 0; k < count; ++k) out[old_size + k] = ids[k];
      return;
    }
    const size_t start = out.size();
    bpe(p, n, out);
    cache.insert(p, n, h, out.data() + start, out.size() - start);
  }
  static uint64_t cache_hash(const unsigned char* p, size_t n) {
    return hash_bytes(p, n) | 1;  // never 0, which marks a piece that is not cached
  }

  void encode_normalized(std::string_view text, std::vector<int32_t>& out, PieceCache& cache) const {
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    for (size_t i = 0; i < n;) {
      const size_t end = piece_end(s, i, n);
      const unsigned char* p = s + i;
      const size_t length = end - i;
      i = end;
      if (length == 1) {
        out.push_back(byte_to_id[p[0]]);
      } else if (length <= PieceCache::kHotMaxBytes) {
        // The hot table is small enough to stay in L2: no prefetching needed.
        const uint64_t key = PieceCache::hot_key(p, length);
        int32_t ids[PieceCache::kHotMaxIds];
        uint8_t found;
        if (cache.find_hot(key, length, ids, found)) {
          out.push_back(ids[0]);
          if (found > 1) out.push_back(ids[1]);
          continue;
        }
        const size_t start = out.size();
        encode_cached_piece(p, length, cache_hash(p, length), out, cache);
        const size_t produced = out.size() - start;
        if (produced <= PieceCache::kHotMaxIds) cache.insert_hot(key, length, out.data() + start, produced);
      } else if (length <= kMaxCachedPieceBytes) {
        encode_cached_piece(p, length, cache_hash(p, length), out, cache);
      } else {
        bpe(p, length, out);
      }
    }
  }

  // Encodes normalized text line by line, caching each line's ids: a chat re-encodes its whole history every
  // turn, and documents repeat lines, so whole lines come back and skip the scan. A line ends after a '\n'
  // that the next character is not white space: no piece of the pattern crosses such a point (white space and
  // punctuation pieces end at the last '\n' before non-space, letters and digits never hold one), so encoding
  // the lines one by one gives exactly the pieces of the whole text.
  void encode_lines(std::string_view text, std::vector<int32_t>& out, PieceCache& cache,
                    PieceCache& line_cache) const {
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    size_t start = 0;
    while (start < n) {
      size_t end = start;
      while (true) {  // the next line end
        const void* newline = std::memchr(s + end, '\n', n - end);
        if (!newline) {
          end = n;
          break;
        }
        end = size_t(static_cast<const unsigned char*>(newline) - s) + 1;
        if (end == n || !starts_with_white_space(s + end, n - end)) break;
      }
      const size_t length = end - start;
      if (length < kMinCachedLineBytes || length > kMaxCachedLineBytes) {
        encode_normalized(text.substr(start, length), out, cache);
      } else {
        const uint64_t h = cache_hash(s + start, length);
        size_t count;
        if (const int32_t* ids = line_cache.find(s + start, length, h, count)) {
          out.insert(out.end(), ids, ids + count);
        } else {
          const size_t first = out.size();
          encode_normalized(text.substr(start, length), out, cache);
          line_cache.insert(s + start, length, h, out.data() + first, out.size() - first);
        }
      }
      start = end;
    }
  }
  static bool starts_with_white_space(const unsigned char* p, size_t available) {
    if (p[0] < 0x80) return kAsciiClasses[p[0]] == kClassSpace || kAsciiClasses[p[0]] == kClassNewline;
    (void)available;  // valid UTF-8: the whole sequence is there
    size_t length;
    return unicode::flags(unicode::decode_valid_utf8(p, length)) & unicode::kWhiteSpace;
  }

  // Splits `text` at the matcher's added tokens exactly as HF's AddedVocabulary::find_matches does, calling
  // on_text(segment) for the text between them and pushing the ids of the tokens.
  template <typename OnText>
  void split_added(std::string_view text, const AddedMatcher& matcher, std::vector<int32_t>& out,
                   OnText&& on_text) const {
    if (matcher.empty) {
      on_text(text);
      return;
    }
    size_t start_offset = 0;
    for (size_t i = 0; i < text.size();) {
      if (matcher.only_start >= 0) {  // one possible first byte (Qwen: '<'): memchr finds candidates fastest
        const void* hit = std::memchr(text.data() + i, matcher.only_start, text.size() - i);
        if (!hit) break;
        i = size_t(static_cast<const char*>(hit) - text.data());
      } else if (!matcher.starts[static_cast<unsigned char>(text[i])]) {
        ++i;
        continue;
      }
      const AddedMatcher::Pattern* match = matcher.match_at(text, i);
      if (!match) {
        ++i;
        continue;
      }
      const AddedToken& token = added[match->token];
      size_t start = i, stop = i + match->text.size();
      if (token.single_word) {
        size_t length;
        const bool word_before =
            start > 0 &&
            (unicode::flags(unicode::decode_valid_utf8(
                 reinterpret_cast<const unsigned char*>(text.data()) + previous_char_start(text, start),
                 length)) &
             unicode::kWord);
        const bool word_after =
            stop < text.size() && (unicode::flags(unicode::decode_valid_utf8(
                                       reinterpret_cast<const unsigned char*>(text.data()) + stop, length)) &
                                   unicode::kWord);
        if (word_before || word_after) {
          i = stop;  // discarded, but HF's match iterator still resumes after it
          continue;
        }
      }
      if (token.lstrip) {
        size_t new_start = start;
        while (new_start > 0) {
          const size_t previous = previous_char_start(text, new_start);
          size_t length;
          if (!is_white_space_at(text, previous, length)) break;
          new_start = previous;
        }
        start = std::max(new_start, start_offset);
      }
      if (token.rstrip) {
        size_t length;
        while (stop < text.size() && is_white_space_at(text, stop, length)) stop += length;
      }
      if (start_offset < start) on_text(text.substr(start_offset, start - start_offset));
      out.push_back(token.id);
      start_offset = stop;
      // HF's match iterator resumes after the match itself, not after the white space rstrip took: a token
      // found inside that white space is still emitted, as HF emits it.
      i += match->text.size();
    }
    if (start_offset < text.size()) on_text(text.substr(start_offset));
  }

  void encode(std::string_view text, std::vector<int32_t>& out) const {
    if (text.size() > kMaxTextBytes)
      throw InputError("text of " + std::to_string(text.size()) + " bytes is over the tokenizer's limit of " +
                       std::to_string(kMaxTextBytes) + " bytes");
    size_t first_nfc_candidate;
    const size_t invalid = unicode::find_invalid_utf8(text, first_nfc_candidate);
    if (invalid != std::string_view::npos) {
      char byte[8];
      std::snprintf(byte, sizeof(byte), "0x%02X", static_cast<unsigned char>(text[invalid]));
      throw InputError("text is not valid UTF-8: byte " + std::string(byte) + " at offset " +
                       std::to_string(invalid));
    }
    thread_local PieceCache cache;
    thread_local PieceCache line_cache;
    cache.bind(serial);
    line_cache.bind(serial);
    thread_local std::string normalized_storage;
    split_added(text, raw_matcher, out, [&](std::string_view segment) {
      // NFC only from the first character that may change: before it the text is already normalized.
      const size_t offset = size_t(segment.data() - text.data());
      const bool may_change = nfc && first_nfc_candidate < offset + segment.size();
      const std::string_view normalized =
          may_change ? unicode::to_nfc(segment, normalized_storage,
                                       first_nfc_candidate > offset ? first_nfc_candidate - offset : 0)
                     : segment;
      split_added(normalized, normalized_matcher, out,
                  [&](std::string_view piece) { encode_lines(piece, out, cache, line_cache); });
    });
  }

  int32_t vocab_size() const { return int32_t(token_offsets.size() - 1); }
  std::string_view token_bytes(int32_t id) const {
    return std::string_view(token_arena)
        .substr(token_offsets[size_t(id)], token_offsets[size_t(id) + 1] - token_offsets[size_t(id)]);
  }
  void check_id(int32_t id) const {
    if (id < 0 || id >= vocab_size())
      throw InputError("token id " + std::to_string(id) + " is out of range: the vocabulary has " +
                       std::to_string(vocab_size()) + " tokens");
  }
  // Whether `id` contributes to decoded text; throws for an unknown id unless they are ignored.
  bool decodes(int32_t id, bool skip_special_tokens, bool ignore_unknown_ids) const {
    if (id < 0 || id >= vocab_size() || !has_token[size_t(id)]) {
      if (ignore_unknown_ids) return false;
      check_id(id);
      return false;
    }
    return !(skip_special_tokens && special[size_t(id)]);
  }

  void load(const json& j);
};

namespace {

const json& member(const json& object, const char* key, const std::string& where,
                   const Tokenizer::Impl& impl) {
  if (!object.is_object() || !object.contains(key)) throw impl.format_error(where + " has no '" + key + "'");
  return object.at(key);
}

bool is_null_or(const json& object, const char* key, const json& value) {
  if (!object.contains(key) || object.at(key).is_null()) return true;
  return object.at(key) == value;
}

bool flag(const json& object, const char* key, bool fallback) {
  if (!object.contains(key) || object.at(key).is_null()) return fallback;
  if (!object.at(key).is_boolean())
    throw FormatError(std::string("'") + key + "' is not a boolean");  // origin added by from_json
  return object.at(key).get<bool>();
}

}  // namespace

void Tokenizer::Impl::load(const json& j) {
  if (!j.is_object()) throw format_error("not a JSON object");

  // Normalizer: NFC or none.
  const json normalizer = j.value("normalizer", json());
  if (normalizer.is_null()) {
    nfc = false;
  } else if (normalizer.is_object() && normalizer.value("type", "") == "NFC") {
    nfc = true;
  } else {
    throw format_error("unsupported normalizer " + normalizer.dump() + " (only NFC or none)");
  }

  // Pre-tokenizer: Split on the Qwen pattern (isolated), then ByteLevel without its own regex.
  const json& pre = member(j, "pre_tokenizer", "tokenizer.json", *this);
  const std::string unsupported_pre =
      "unsupported pre_tokenizer (only Sequence[Split(Qwen pattern, Isolated), "
      "ByteLevel(use_regex=false)]): ";
  if (!pre.is_object() || pre.value("type", "") != "Sequence" || !pre.contains("pretokenizers") ||
      !pre["pretokenizers"].is_array() || pre["pretokenizers"].size() != 2)
    throw format_error(unsupported_pre + pre.dump().substr(0, 300));
  const json& split = pre["pretokenizers"][0];
  const json& byte_level_pre = pre["pretokenizers"][1];
  if (!split.is_object() || split.value("type", "") != "Split" || split.value("behavior", "") != "Isolated" ||
      split.value("invert", false) || !split.contains("pattern") || !split["pattern"].is_object() ||
      !split["pattern"].contains("Regex") || !split["pattern"]["Regex"].is_string())
    throw format_error(unsupported_pre + split.dump().substr(0, 300));
  const std::string pattern = split["pattern"]["Regex"].get<std::string>();
  if (pattern == kQwenPattern) {
    max_digits = 1;
  } else if (pattern == kDigitTriplesPattern) {
    max_digits = 3;
  } else {
    throw format_error(
        "unsupported pre-tokenizer pattern " + json(pattern).dump() +
        ": this tokenizer implements only the Qwen2/Qwen3 pattern (and its \\p{N}{1,3} variant)");
  }
  if (!byte_level_pre.is_object() || byte_level_pre.value("type", "") != "ByteLevel" ||
      flag(byte_level_pre, "add_prefix_space", false) || flag(byte_level_pre, "use_regex", true))
    throw format_error(unsupported_pre + byte_level_pre.dump());

  // Post-processor and decoder must not change ids or text beyond byte-level decoding.
  const json post = j.value("post_processor", json());
  if (!post.is_null() && !(post.is_object() && post.value("type", "") == "ByteLevel"))
    throw format_error("unsupported post_processor " + post.dump().substr(0, 300) +
                       " (only ByteLevel or none: Qwen adds no special tokens when encoding)");
  const json decoder = j.value("decoder", json());
  if (!(decoder.is_object() && decoder.value("type", "") == "ByteLevel"))
    throw format_error("unsupported decoder " + decoder.dump().substr(0, 300) + " (only ByteLevel)");
  if (j.contains("truncation") && !j["truncation"].is_null())
    throw format_error("truncation settings are not supported");
  if (j.contains("padding") && !j["padding"].is_null())
    throw format_error("padding settings are not supported");

  // Model: byte-level BPE.
  const json& model = member(j, "model", "tokenizer.json", *this);
  if (model.value("type", "BPE") != "BPE")
    throw format_error("unsupported model type " + model.value("type", ""));
  if (model.contains("dropout") && !model["dropout"].is_null())
    throw format_error("BPE dropout is not supported");
  if (flag(model, "byte_fallback", false)) throw format_error("byte_fallback is not supported");
  if (!is_null_or(model, "continuing_subword_prefix", "") || !is_null_or(model, "end_of_word_suffix", ""))
    throw format_error("continuing_subword_prefix / end_of_word_suffix are not supported");
  ignore_merges = flag(model, "ignore_merges", false);
  const json& vocab = member(model, "vocab", "model", *this);
  const json& merge_list = member(model, "merges", "model", *this);
  if (!vocab.is_object() || vocab.empty()) throw format_error("model.vocab is not a non-empty object");
  if (!merge_list.is_array()) throw format_error("model.merges is not an array");

  constexpr int64_t kMaxId = int64_t(1) << 24;
  struct Entry {
    std::string spelling;
    int32_t id;
    std::optional<std::string> bytes;
  };
  std::vector<Entry> entries;
  entries.reserve(vocab.size());
  int64_t max_id = -1;
  for (const auto& [spelling, id_json] : vocab.items()) {
    if (!id_json.is_number_integer())
      throw format_error("vocab entry " + json(spelling).dump() + " has no integer id");
    const int64_t id = id_json.get<int64_t>();
    if (id < 0 || id >= kMaxId) throw format_error("vocab id " + std::to_string(id) + " is out of range");
    max_id = std::max(max_id, id);
    entries.push_back({spelling, int32_t(id), byte_level().to_bytes(spelling)});
  }
  std::vector<AddedToken> added_tokens;
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) throw format_error("added_tokens is not an array");
    for (const json& t : j["added_tokens"]) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
          !t["content"].is_string())
        throw format_error("malformed added token " + t.dump().substr(0, 200));
      AddedToken token;
      const int64_t id = t["id"].get<int64_t>();
      if (id < 0 || id >= kMaxId)
        throw format_error("added token id " + std::to_string(id) + " is out of range");
      token.id = int32_t(id);
      token.content = t["content"].get<std::string>();
      token.special = flag(t, "special", false);
      token.normalized = flag(t, "normalized", !token.special);
      token.lstrip = flag(t, "lstrip", false);
      token.rstrip = flag(t, "rstrip", false);
      token.single_word = flag(t, "single_word", false);
      if (token.content.empty()) continue;  // HF ignores empty added tokens
      max_id = std::max(max_id, id);
      added_tokens.push_back(std::move(token));
    }
  }

  // Decoding bytes of every id: the byte-level alphabet's bytes, or the UTF-8 spelling itself when the
  // spelling has a character outside the alphabet (what HF's ByteLevel decoder does). Added tokens override
  // the vocab.
  const size_t size = size_t(max_id + 1);
  std::vector<std::string> bytes_of(size);
  has_token.assign(size, 0);
  special.assign(size, 0);
  std::vector<std::pair<std::string, int32_t>> encodable;
  encodable.reserve(entries.size());
  for (const Entry& e : entries) {
    if (has_token[size_t(e.id)]) throw format_error("vocab id " + std::to_string(e.id) + " appears twice");
    has_token[size_t(e.id)] = 1;
    bytes_of[size_t(e.id)] = e.bytes ? *e.bytes : e.spelling;
    if (e.bytes) encodable.emplace_back(*e.bytes, e.id);
  }
  bytes_to_id.build(encodable);
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, char(b));
    byte_to_id[size_t(b)] = bytes_to_id.find(one);
    if (byte_to_id[size_t(b)] < 0)
      throw format_error("the vocabulary lacks the byte-level token for byte " + std::to_string(b) + " (" +
                         byte_level().to_spelling(one) + ")");
  }
  for (const AddedToken& t : added_tokens) {
    has_token[size_t(t.id)] = 1;
    special[size_t(t.id)] = t.special;
    const auto bytes = byte_level().to_bytes(t.content);
    bytes_of[size_t(t.id)] = bytes ? *bytes : t.content;
  }
  token_offsets.assign(size + 1, 0);
  token_arena.clear();
  for (size_t id = 0; id < size; ++id) {
    token_offsets[id] = uint32_t(token_arena.size());
    token_arena += bytes_of[id];
  }
  token_offsets[size] = uint32_t(token_arena.size());

  // Merges, by rank (their order). Each side and the result must be in the vocabulary, as HF requires.
  merges.reserve(merge_list.size());
  uint32_t rank = 0;
  for (const json& m : merge_list) {
    std::string left, right;
    if (m.is_string()) {
      const std::string text = m.get<std::string>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos)
        throw format_error("merge " + json(text).dump() + " is not two tokens separated by a space");
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      throw format_error("merge " + std::to_string(rank) + " is malformed: " + m.dump().substr(0, 200));
    }
    const auto left_bytes = byte_level().to_bytes(left), right_bytes = byte_level().to_bytes(right);
    const int32_t left_id = left_bytes ? bytes_to_id.find(*left_bytes) : -1;
    const int32_t right_id = right_bytes ? bytes_to_id.find(*right_bytes) : -1;
    const int32_t merged_id = left_bytes && right_bytes ? bytes_to_id.find(*left_bytes + *right_bytes) : -1;
    if (left_id < 0 || right_id < 0 || merged_id < 0)
      throw format_error("merge " + std::to_string(rank) + " (" + json(left).dump() + ", " +
                         json(right).dump() + ") refers to a token that is not in the vocabulary");
    merges.insert(left_id, right_id, rank, merged_id);
    ++rank;
  }

  // Added tokens: the raw trie holds the non-normalized ones, the normalized trie the others (matched in NFC
  // form).
  added = std::move(added_tokens);
  std::vector<std::pair<std::string, int32_t>> contents;
  for (const AddedToken& t : added) contents.emplace_back(t.content, t.id);
  added_by_content.build(contents);
  for (size_t i = 0; i < added.size(); ++i) {
    if (added[i].normalized && nfc) {
      std::string storage;
      normalized_matcher.add(std::string(unicode::to_nfc(added[i].content, storage)), i);
    } else if (added[i].normalized) {
      normalized_matcher.add(added[i].content, i);
    } else {
      raw_matcher.add(added[i].content, i);
    }
  }
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_json(std::string_view json_text, const std::string& origin) {
  auto impl = std::make_unique<Impl>();
  impl->origin = origin;
  if (unicode::find_invalid_utf8(json_text) != std::string_view::npos)
    throw impl->format_error("not valid UTF-8");
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    throw impl->format_error(std::string("invalid JSON: ") + e.what());
  }
  try {
    impl->load(j);
  } catch (const json::exception& e) {  // a field of an unexpected type
    throw impl->format_error(std::string("unexpected structure: ") + e.what());
  } catch (const FormatError& e) {
    const std::string message = e.what();
    if (message.rfind(impl->origin + ": ", 0) == 0) throw;
    throw impl->format_error(message);
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  return from_json(read_file(tokenizer_json), tokenizer_json.string());
}

Tokenizer Tokenizer::from_model_dir(const std::filesystem::path& directory) {
  std::error_code ec;
  if (!std::filesystem::is_directory(directory, ec))
    throw InputError("model directory " + directory.string() + " does not exist");
  return from_file(directory / "tokenizer.json");
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  impl_->encode(text, ids);
  return ids;
}

void Tokenizer::encode_into(std::string_view text, std::vector<int32_t>& ids) const {
  impl_->encode(text, ids);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens,
                              bool ignore_unknown_ids) const {
  std::string bytes;
  for (const int32_t id : ids) {
    if (impl_->decodes(id, skip_special_tokens, ignore_unknown_ids)) bytes += impl_->token_bytes(id);
  }
  if (unicode::find_invalid_utf8(bytes) == std::string_view::npos) return bytes;
  std::string text;
  unicode::append_utf8_lossy(text, bytes);
  return text;
}

int32_t Tokenizer::vocab_size() const {
  return impl_->vocab_size();
}
bool Tokenizer::has_token(int32_t id) const {
  return id >= 0 && id < impl_->vocab_size() && impl_->has_token[size_t(id)];
}
std::string_view Tokenizer::token_bytes(int32_t id) const {
  impl_->check_id(id);
  return impl_->token_bytes(id);
}
std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const int32_t id = impl_->added_by_content.find(token); id >= 0) return id;
  if (unicode::find_invalid_utf8(token) != std::string_view::npos) return std::nullopt;
  const auto bytes = byte_level().to_bytes(token);
  if (!bytes) return std::nullopt;
  const int32_t id = impl_->bytes_to_id.find(*bytes);
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}
bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < impl_->vocab_size() && impl_->special[size_t(id)];
}
const std::vector<AddedToken>& Tokenizer::added_tokens() const {
  return impl_->added;
}

std::string Tokenizer::normalize(std::string_view text) const {
  if (unicode::find_invalid_utf8(text) != std::string_view::npos) throw InputError("text is not valid UTF-8");
  if (!impl_->nfc) return std::string(text);
  std::string storage;
  return std::string(unicode::to_nfc(text, storage));
}

std::vector<std::string_view> Tokenizer::pre_tokenize(std::string_view normalized_text) const {
  if (unicode::find_invalid_utf8(normalized_text) != std::string_view::npos)
    throw InputError("text is not valid UTF-8");
  std::vector<std::string_view> pieces;
  const auto* s = reinterpret_cast<const unsigned char*>(normalized_text.data());
  for (size_t i = 0; i < normalized_text.size();) {
    const size_t end = impl_->piece_end(s, i, normalized_text.size());
    pieces.push_back(normalized_text.substr(i, end - i));
    i = end;
  }
  return pieces;
}

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens, bool ignore_unknown_ids)
    : tokenizer_(&tokenizer),
      skip_special_tokens_(skip_special_tokens),
      ignore_unknown_ids_(ignore_unknown_ids) {}

std::string StreamDecoder::push(int32_t id) {
  const Tokenizer::Impl& impl = *tokenizer_->impl_;
  std::string text;
  if (!impl.decodes(id, skip_special_tokens_, ignore_unknown_ids_)) return text;
  pending_ += impl.token_bytes(id);
  const size_t consumed = unicode::append_utf8_lossy(text, pending_, /*final_chunk=*/false);
  pending_.erase(0, consumed);
  return text;
}

std::string StreamDecoder::finish() {
  std::string text;
  unicode::append_utf8_lossy(text, pending_, /*final_chunk=*/true);
  pending_.clear();
  return text;
}

}  // namespace qwen3
