// The Qwen3 tokenizer: byte-level BPE read from a Hugging Face `tokenizer.json`, producing exactly the ids of
// Hugging Face `tokenizers` 0.23.2 (`Tokenizer.from_file(path).encode(text).ids`; Qwen3 adds no BOS/EOS).
//
// Encode: added tokens are cut out of the raw text first (leftmost-longest, honouring single_word, lstrip,
// rstrip and normalized as HF does), the rest is NFC-normalized, split by a hand-written scanner for the Qwen
// pre-tokenizer regex (exact Unicode classes, no regex engine), and each piece is merged by BPE rank. Pieces
// and whole lines repeat (a chat re-encodes its history every turn), so their ids are cached per thread.
// Decode: each token's bytes, joined, read as UTF-8 the way Rust's from_utf8_lossy does; StreamDecoder does
// the same incrementally for generation.
//
// Thread safety: a Tokenizer is immutable after loading; encode/decode may run concurrently from many
// threads. Each encoding thread keeps its own caches (bounded: at most about 160 MB, typically a few MB).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qwen3 {

// An entry of tokenizer.json's `added_tokens`: matched in the text before pre-tokenization.
struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;      // dropped by decode(..., skip_special_tokens = true)
  bool normalized = false;   // matched in the NFC text instead of the raw text
  bool lstrip = false;       // the match swallows white space on its left
  bool rstrip = false;       // ... and on its right
  bool single_word = false;  // only matches when not inside a word
};

class Tokenizer {
 public:
  // Larger texts are refused with an InputError. 32 MiB is far past any model's context (Qwen3's 128K tokens
  // are about 0.5 MB of text) and bounds the worst case: one 32 MiB piece (a single run of letters) is merged
  // in under ten seconds with about 3 GB of scratch memory; ordinary text needs a fraction of its size.
  static constexpr size_t kMaxTextBytes = size_t(32) << 20;

  // Reads a tokenizer.json; FormatError when it is malformed or uses a feature this tokenizer does not
  // implement (another pre-tokenizer pattern, byte fallback, dropout, a post-processor adding tokens ...).
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json);
  // `directory`/tokenizer.json.
  static Tokenizer from_model_dir(const std::filesystem::path& directory);
  // From the JSON text itself; `origin` names it in error messages.
  static Tokenizer from_json(std::string_view json_text, const std::string& origin = "tokenizer.json");

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text` (UTF-8). InputError on invalid UTF-8 (with the byte offset) or a text over
  // kMaxTextBytes.
  std::vector<int32_t> encode(std::string_view text) const;
  // Same, appending to `ids` (no allocation once `ids` has capacity).
  void encode_into(std::string_view text, std::vector<int32_t>& ids) const;

  // The text of `ids`. Ids outside [0, vocab_size()) are an InputError unless `ignore_unknown_ids`, which
  // skips them as HF does (a model's embedding table is often larger than its vocabulary). Bytes that are not
  // valid UTF-8 become U+FFFD, as in HF.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false,
                     bool ignore_unknown_ids = false) const;

  // One past the largest token id (regular and added tokens).
  int32_t vocab_size() const;
  // Whether `id` names a token (ids inside the range may be unused).
  bool has_token(int32_t id) const;
  // The bytes a token decodes to (may be part of a UTF-8 sequence); empty for an unused id. PRECOND: in
  // range.
  std::string_view token_bytes(int32_t id) const;
  // A token's id by its tokenizer.json spelling (byte-level form such as "Ġhello", or an added token's
  // content).
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool is_special(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const;

  // The stages of encode, exposed for tests and tools. The normalizer's output (NFC, or the text unchanged
  // when tokenizer.json has no normalizer); and the pre-tokenizer's pieces of an already normalized text.
  std::string normalize(std::string_view text) const;
  std::vector<std::string_view> pre_tokenize(std::string_view normalized_text) const;

  struct Impl;

 private:
  friend class StreamDecoder;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Turns ids into text as they are generated. A token that ends inside a UTF-8 sequence is held back until the
// sequence completes, so every piece returned is valid UTF-8 and the concatenation of all pieces (and
// finish()) equals Tokenizer::decode of all the ids.
class StreamDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false,
                         bool ignore_unknown_ids = false);

  // The text that `id` completes (often empty inside a multi-byte character, or the whole token).
  std::string push(int32_t id);
  // Flushes bytes still held back: an unfinished sequence becomes U+FFFD. The decoder is then empty again.
  std::string finish();
  // Forgets held-back bytes (a new reply).
  void reset() { pending_.clear(); }
  // Bytes held back now, waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  bool ignore_unknown_ids_;
  std::string pending_;
};

}  // namespace qwen3
