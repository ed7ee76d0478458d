// The tokenizer against Hugging Face `tokenizers` 0.23.2, run live on the committed corpus (tests/data/
// tokenizer-corpus) through tests/cpu/test_tokenizer_hf.py in build/pyenv (scripts/python-env.sh makes it);
// plus unit tests of the streaming decoder, added tokens, bad input, and the tokenize/detokenize commands.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/error.h"
#include "test_util.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace qwen3 {
namespace {

const std::filesystem::path kDataDir = QWEN3_TEST_DATA_DIR;
const std::filesystem::path kTokenizerJson = kDataDir / "tokenizer" / "tokenizer.json";
const std::filesystem::path kCorpus = kDataDir / "tokenizer-corpus" / "corpus.jsonl";
const std::string kQwen3 = QWEN3_BINARY;

const Tokenizer& qwen_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::from_file(kTokenizerJson);
  return tokenizer;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return std::move(buffer).str();
}

std::vector<std::string> read_corpus() {
  std::vector<std::string> strings;
  std::ifstream in(kCorpus);
  std::string line;
  while (std::getline(in, line)) strings.push_back(nlohmann::json::parse(line).get<std::string>());
  return strings;
}

// The test venv's python: QWEN3_PYTHON, else <repo>/build/pyenv/bin/python.
std::filesystem::path python() {
  if (const char* p = std::getenv("QWEN3_PYTHON")) return p;
  return kDataDir.parent_path().parent_path() / "build" / "pyenv" / "bin" / "python";
}

std::string describe(const Tokenizer& t, const std::vector<int32_t>& ids, size_t around) {
  std::string out;
  const size_t begin = around > 4 ? around - 4 : 0;
  for (size_t i = begin; i < std::min(ids.size(), around + 5); ++i) {
    out += (i == around ? " [" : " ") + std::to_string(ids[i]) + "=" +
           nlohmann::json(t.decode(std::vector<int32_t>{ids[i]})).dump() + (i == around ? "]" : "");
  }
  return out;
}

// Runs the Hugging Face helper once per test run; its output drives every parity test below.
class HfParity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    out_dir_ = test::make_temp_dir("tokenizer-hf");
    const std::filesystem::path helper =
        std::filesystem::path(__FILE__).parent_path() / "test_tokenizer_hf.py";
    const std::string command = python().string() + " " + helper.string() + " " + kTokenizerJson.string() +
                                " " + kCorpus.string() + " " + out_dir_.string();
    result_ = test::run_command(command);
    if (result_.exit_code == 0) expected_ = nlohmann::json::parse(read_text(out_dir_ / "expected.json"));
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(out_dir_); }
  void SetUp() override {
    // Fails rather than skips: without the reference there is no parity check at all.
    ASSERT_TRUE(std::filesystem::exists(python()))
        << "no Python for the Hugging Face reference at " << python() << ": run scripts/python-env.sh";
    ASSERT_EQ(result_.exit_code, 0) << "the Hugging Face helper failed:\n" << result_.err;
  }
  static std::filesystem::path out_dir_;
  static test::CommandResult result_;
  static nlohmann::json expected_;
};
std::filesystem::path HfParity::out_dir_;
test::CommandResult HfParity::result_;
nlohmann::json HfParity::expected_;

TEST_F(HfParity, CorpusIdsAndDecodeMatch) {
  const Tokenizer& t = qwen_tokenizer();
  const std::vector<std::string> corpus = read_corpus();
  const nlohmann::json& expected = expected_["corpus"];
  ASSERT_EQ(expected["ids"].size(), corpus.size());
  size_t bytes = 0, id_mismatches = 0, decode_mismatches = 0, stream_mismatches = 0, tokens = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    bytes += corpus[i].size();
    const std::vector<int32_t> want = expected["ids"][i].get<std::vector<int32_t>>();
    const std::vector<int32_t> got = t.encode(corpus[i]);
    tokens += got.size();
    if (got != want) {
      size_t at = 0;
      while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
      if (++id_mismatches <= 5)
        ADD_FAILURE() << "string " << i << " " << nlohmann::json(corpus[i]).dump().substr(0, 200)
                      << "\n first difference at token " << at << "\n want" << describe(t, want, at)
                      << "\n got " << describe(t, got, at);
    }
    if (t.decode(want) != expected["decode"][i].get<std::string>() ||
        t.decode(want, /*skip_special_tokens=*/true) !=
            expected["decode_skip_special"][i].get<std::string>()) {
      if (++decode_mismatches <= 5) ADD_FAILURE() << "decode differs for string " << i;
    }
    StreamDecoder stream(t);
    std::string streamed;
    for (int32_t id : want) {
      const std::string piece = stream.push(id);
      EXPECT_EQ(unicode::find_invalid_utf8(piece), std::string_view::npos);
      streamed += piece;
    }
    streamed += stream.finish();
    if (streamed != expected["decode"][i].get<std::string>() && ++stream_mismatches <= 5)
      ADD_FAILURE() << "streamed decode differs for string " << i;
  }
  // Again with warm caches (pieces and whole lines now come from the per-thread caches).
  size_t warm_mismatches = 0;
  for (size_t i = 0; i < corpus.size(); ++i)
    if (t.encode(corpus[i]) != expected["ids"][i].get<std::vector<int32_t>>()) ++warm_mismatches;
  EXPECT_EQ(warm_mismatches, 0u);
  std::printf(
      "parity corpus: %zu strings, %zu bytes, %zu tokens; mismatches: ids %zu, decode %zu, stream %zu\n",
      corpus.size(), bytes, tokens, id_mismatches, decode_mismatches, stream_mismatches);
  EXPECT_GE(bytes, size_t(1) << 20) << "the corpus must hold at least 1 MB";
  EXPECT_EQ(id_mismatches, 0u);
  EXPECT_EQ(decode_mismatches, 0u);
  EXPECT_EQ(stream_mismatches, 0u);
}

TEST_F(HfParity, RandomIdSequencesDecodeAsHfDoes) {
  const Tokenizer& t = qwen_tokenizer();
  for (const auto& c : expected_["random"]) {
    const std::vector<int32_t> ids = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(t.decode(ids), c["decode"].get<std::string>()) << c["ids"].dump();
    EXPECT_EQ(t.decode(ids, true), c["decode_skip_special"].get<std::string>()) << c["ids"].dump();
    for (bool skip : {false, true}) {
      StreamDecoder stream(t, skip);
      std::string streamed;
      for (int32_t id : ids) streamed += stream.push(id);
      streamed += stream.finish();
      EXPECT_EQ(streamed, t.decode(ids, skip)) << c["ids"].dump();
    }
  }
}

TEST_F(HfParity, AddedTokenFlagsAndDigitPatternVariants) {
  for (const auto& variant : expected_["variants"]) {
    const Tokenizer t = Tokenizer::from_file(variant["tokenizer"].get<std::string>());
    const auto& strings = variant["strings"];
    for (size_t i = 0; i < strings.size(); ++i) {
      EXPECT_EQ(t.encode(strings[i].get<std::string>()), variant["ids"][i].get<std::vector<int32_t>>())
          << variant["tokenizer"] << " on " << strings[i].dump().substr(0, 200);
    }
  }
}

// Every code point, not just those in the corpus: the classes the pre-tokenizer sees and NFC in a few
// contexts (the Unicode versions of HF's regex engine and normalizer differ, and the tables must follow
// both).
TEST_F(HfParity, EveryCodePointClassAndNfc) {
  const Tokenizer& t = qwen_tokenizer();
  std::string dump;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string x;
    unicode::append_utf8(x, cp);
    auto pieces = [&](const std::string& s) { return t.pre_tokenize(s).size(); };
    const bool letter = pieces("a" + x) == 1;
    const bool number = !letter && pieces(x + x) == 2;
    const bool space = !letter && !number && (cp == '\r' || cp == '\n' || pieces("!" + x) == 2);
    dump.push_back(char(letter | number << 1 | space << 2));
    for (const std::string& context : {x, "q\u0301" + x, "q" + x + "\u0334", x + "\u0301", x + "\u0334"}) {
      const std::string normalized = t.normalize(context);
      const uint32_t length = uint32_t(normalized.size());
      for (int b = 0; b < 4; ++b) dump.push_back(char((length >> (8 * b)) & 0xFF));
      dump += normalized;
    }
  }
  const auto ours = out_dir_ / "ours_unicode.bin";
  test::write_file(ours, dump);
  const std::filesystem::path helper = std::filesystem::path(__FILE__).parent_path() / "test_tokenizer_hf.py";
  const auto r = test::run_command(python().string() + " " + helper.string() + " --unicode " +
                                   kTokenizerJson.string() + " " + ours.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("unicode mismatches: 0\n"), std::string::npos) << r.out;
  std::printf("%s", r.out.substr(0, r.out.find('\n') + 1).c_str());
}

// ---- Unit tests on the real tokenizer.

std::vector<int32_t> byte_tokens(const Tokenizer& t, std::string_view bytes) {
  std::vector<int32_t> ids;
  for (unsigned char b : bytes) {
    std::string one(1, char(b));
    // The byte's own token: the one whose decoded bytes are exactly this byte.
    for (int32_t id = 0; id < 256 + 1000 && ids.size() < bytes.size(); ++id) {
      if (t.token_bytes(id) == one) {
        ids.push_back(id);
        break;
      }
    }
  }
  EXPECT_EQ(ids.size(), bytes.size());
  return ids;
}

TEST(Tokenizer, KnownIds) {
  const Tokenizer& t = qwen_tokenizer();
  EXPECT_EQ(t.vocab_size(), 151669);
  EXPECT_EQ(t.encode("Hello world"), (std::vector<int32_t>{9707, 1879}));
  EXPECT_EQ(t.encode(""), std::vector<int32_t>{});
  EXPECT_EQ(t.encode("<|im_start|>user\nhi<|im_end|>"),
            (std::vector<int32_t>{151644, 872, 198, 6023, 151645}));
  EXPECT_EQ(t.token_to_id("<think>"), 151667);
  EXPECT_EQ(t.token_to_id("Ġworld"), 1879);
  EXPECT_EQ(t.token_to_id("no such token"), std::nullopt);
}

TEST(Tokenizer, PreTokenizerPieces) {
  const Tokenizer& t = qwen_tokenizer();
  using Pieces = std::vector<std::string_view>;
  EXPECT_EQ(t.pre_tokenize("a  \n  b"), (Pieces{"a", "  \n", " ", " b"}));
  EXPECT_EQ(t.pre_tokenize("a \t b"), (Pieces{"a", " \t", " b"}));
  EXPECT_EQ(t.pre_tokenize("...hello"), (Pieces{"...", "hello"}));
  EXPECT_EQ(t.pre_tokenize("ab\r\n\r\n cd"), (Pieces{"ab", "\r\n\r\n", " cd"}));
  EXPECT_EQ(t.pre_tokenize("''s"), (Pieces{"''", "s"}));
  EXPECT_EQ(t.pre_tokenize("12 34"), (Pieces{"1", "2", " ", "3", "4"}));
  EXPECT_EQ(t.pre_tokenize("x'\xC5\xBF"
                           "a x'Lla x'DA"),
            (Pieces{"x", "'\xC5\xBF", "a", " x", "'Ll", "a", " x", "'D", "A"}));
  EXPECT_EQ(t.pre_tokenize(" \xC2\xA0x"), (Pieces{" ", "\xC2\xA0x"}));  // NBSP is \s but may lead a word
  EXPECT_EQ(t.pre_tokenize("end  "), (Pieces{"end", "  "}));
}

TEST(Tokenizer, NormalizesToNfcWithUnicode9Data) {
  const Tokenizer& t = qwen_tokenizer();
  EXPECT_EQ(t.normalize("e\xCC\x81"), "\xC3\xA9");                   // e + U+0301 -> é
  EXPECT_EQ(t.normalize("\xE2\x84\xAB"), "\xC3\x85");                // Angstrom sign -> Å
  EXPECT_EQ(t.normalize("q\xCC\xA3\xCC\x87"), "q\xCC\xA3\xCC\x87");  // already ordered
  EXPECT_EQ(t.normalize("q\xCC\x87\xCC\xA3"), "q\xCC\xA3\xCC\x87");  // reordered by combining class
  EXPECT_EQ(t.normalize("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // jamo -> 각
  // U+0898 (Unicode 14) is unknown to HF's Unicode 9 normalizer: it keeps combining class 0, so no
  // reordering.
  EXPECT_EQ(t.normalize("q\xE0\xA2\x98\xCC\xB4"), "q\xE0\xA2\x98\xCC\xB4");
}

TEST(Tokenizer, AddedTokensAreNotSkippedUnlessSpecial) {
  const Tokenizer& t = qwen_tokenizer();
  const std::vector<int32_t> ids = t.encode("<|im_start|>assistant\n<think>\nx\n</think>\n\nok<|im_end|>");
  EXPECT_EQ(ids.front(), 151644);
  EXPECT_EQ(ids.back(), 151645);
  EXPECT_TRUE(t.is_special(151644));
  EXPECT_FALSE(t.is_special(151667));  // <think> is an added token, not a special one
  EXPECT_EQ(t.decode(ids), "<|im_start|>assistant\n<think>\nx\n</think>\n\nok<|im_end|>");
  EXPECT_EQ(t.decode(ids, /*skip_special_tokens=*/true), "assistant\n<think>\nx\n</think>\n\nok");
  // Partial added tokens are ordinary text.
  const std::vector<int32_t> partial = t.encode("<|im_start|<think");
  EXPECT_EQ(std::count(partial.begin(), partial.end(), 151644), 0);
  EXPECT_EQ(std::count(partial.begin(), partial.end(), 151667), 0);
}

TEST(StreamDecoder, HoldsBackSplitCharacters) {
  const Tokenizer& t = qwen_tokenizer();
  StreamDecoder stream(t);
  // "é" as its two byte tokens: nothing until the second byte.
  const std::vector<int32_t> e_acute = byte_tokens(t, "\xC3\xA9");
  EXPECT_EQ(stream.push(e_acute[0]), "");
  EXPECT_EQ(stream.pending_bytes(), 1u);
  EXPECT_EQ(stream.push(e_acute[1]), "\xC3\xA9");
  // A 4-byte emoji across four tokens, then a whole word.
  const std::vector<int32_t> emoji = byte_tokens(t, "\xF0\x9F\x98\x80");
  EXPECT_EQ(stream.push(emoji[0]), "");
  EXPECT_EQ(stream.push(emoji[1]), "");
  EXPECT_EQ(stream.push(emoji[2]), "");
  EXPECT_EQ(stream.push(emoji[3]), "\xF0\x9F\x98\x80");
  EXPECT_EQ(stream.push(1879), " world");
  // A character cut off by the end becomes U+FFFD on finish; a byte that can never start one at once.
  EXPECT_EQ(stream.push(e_acute[0]), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.pending_bytes(), 0u);
  const std::vector<int32_t> stray = byte_tokens(t, "\xFF");
  EXPECT_EQ(stream.push(stray[0]), "\xEF\xBF\xBD");
  // An interrupted sequence: the lead byte becomes U+FFFD and the next character still comes out.
  EXPECT_EQ(stream.push(e_acute[0]), "");
  EXPECT_EQ(stream.push(9707), "\xEF\xBF\xBDHello");
  // Multi-token CJK text streams to the same text as decode.
  const std::string text = "日本語のテキストと中文，한국어 😀👍🏽 done";
  std::string streamed;
  for (int32_t id : t.encode(text)) streamed += stream.push(id);
  streamed += stream.finish();
  EXPECT_EQ(streamed, text);
  // Special tokens can be dropped by the stream too.
  StreamDecoder skipping(t, /*skip_special_tokens=*/true);
  EXPECT_EQ(skipping.push(151645), "");
  EXPECT_EQ(skipping.push(151667), "<think>");
}

// Fresh random text each run (the seed is printed): decoding gives back the NFC text, streaming agrees, and
// random bytes either encode or fail with an InputError, never crash.
TEST(Tokenizer, RandomTextRoundTrips) {
  const Tokenizer& t = qwen_tokenizer();
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x20, 0x7E},     {0x9, 0xD},       {0xA0, 0x2FF},      {0x300, 0x36F},
      {0x370, 0x52F},   {0x591, 0x6FF},   {0x900, 0xDFF},     {0xE00, 0xEFF},
      {0x1100, 0x11FF}, {0x2000, 0x206F}, {0x3000, 0x30FF},   {0x4E00, 0x9FFF},
      {0xAC00, 0xD7A3}, {0xFF00, 0xFFEF}, {0x1F300, 0x1FAFF}, {0x10000, 0x10FFFF}};
  for (int i = 0; i < 300; ++i) {
    std::string text;
    const size_t length = rng() % 200;
    for (size_t k = 0; k < length; ++k) {
      const auto& [lo, hi] = ranges[rng() % ranges.size()];
      char32_t cp = lo + char32_t(rng() % (hi - lo + 1));
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
      if (cp == '<') cp = '>';  // no added tokens here: NFC of the whole text is then what encode normalizes
      unicode::append_utf8(text, cp);
    }
    const std::vector<int32_t> ids = t.encode(text);
    ASSERT_EQ(t.decode(ids), t.normalize(text)) << nlohmann::json(text).dump();
    StreamDecoder stream(t);
    std::string streamed;
    for (int32_t id : ids) streamed += stream.push(id);
    EXPECT_EQ(streamed + stream.finish(), t.normalize(text));
  }
  for (int i = 0; i < 2000; ++i) {
    std::string bytes(rng() % 64, '\0');
    for (char& b : bytes) b = char(rng() % 4 == 0 ? rng() % 256 : 0x20 + rng() % 0x60);
    try {
      t.decode(t.encode(bytes));
    } catch (const InputError&) {
    }
  }
}

TEST(Tokenizer, RejectsBadText) {
  const Tokenizer& t = qwen_tokenizer();
  auto expect_invalid = [&](const std::string& text, const std::string& needle) {
    try {
      t.encode(text);
      ADD_FAILURE() << "no error for a text of " << text.size() << " bytes";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_invalid("ok \xFF", "byte 0xFF at offset 3");
  expect_invalid("\xC3", "offset 0");                   // truncated
  expect_invalid("ab\xC0\xAF", "offset 2");             // overlong '/'
  expect_invalid("\xED\xA0\x80", "offset 0");           // a surrogate
  expect_invalid("\xF4\x90\x80\x80", "offset 0");       // past U+10FFFF
  expect_invalid("<|im_start|>\xE2\x82", "offset 12");  // after a special token
  const std::string huge(Tokenizer::kMaxTextBytes + 1, 'a');
  expect_invalid(huge, "limit");
  EXPECT_THROW(t.decode(std::vector<int32_t>{1, 151669}), InputError);
  EXPECT_THROW(t.decode(std::vector<int32_t>{-1}), InputError);
  EXPECT_EQ(t.decode(std::vector<int32_t>{9707, 151900, -5}, false, /*ignore_unknown_ids=*/true), "Hello");
  StreamDecoder stream(t);
  EXPECT_THROW(stream.push(1 << 30), InputError);
}

TEST(Tokenizer, RejectsBadTokenizerJson) {
  const std::string real = read_text(kTokenizerJson);
  auto expect_format_error = [](const std::string& json_text, const std::string& needle) {
    try {
      Tokenizer::from_json(json_text, "test.json");
      ADD_FAILURE() << "no error, expected one mentioning '" << needle << "'";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("test.json"), std::string::npos) << e.what();
    }
  };
  expect_format_error("", "invalid JSON");
  expect_format_error(real.substr(0, real.size() / 2), "invalid JSON");
  expect_format_error("[1, 2]", "not a JSON object");
  expect_format_error("{}", "pre_tokenizer");
  auto edited = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(real);
    edit(j);
    return j.dump();
  };
  expect_format_error(
      edited([](auto& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\w+"; }),
      "unsupported pre-tokenizer pattern");
  expect_format_error(edited([](auto& j) {
                        j["pre_tokenizer"] = {{"type", "Whitespace"}};
                      }),
                      "pre_tokenizer");
  expect_format_error(edited([](auto& j) { j["normalizer"] = {{"type", "NFKC"}}; }), "normalizer");
  expect_format_error(edited([](auto& j) { j["model"]["byte_fallback"] = true; }), "byte_fallback");
  expect_format_error(edited([](auto& j) { j["model"]["dropout"] = 0.1; }), "dropout");
  expect_format_error(edited([](auto& j) { j["model"]["merges"][5] = {"Ġ", "no-such-token"}; }), "merge 5");
  expect_format_error(edited([](auto& j) { j["model"]["merges"][6] = 42; }), "merge 6 is malformed");
  expect_format_error(edited([](auto& j) { j["model"]["vocab"].erase("Ġ"); }), "byte 32");
  expect_format_error(edited([](auto& j) { j["model"]["vocab"]["dup"] = 5; }), "appears twice");
  expect_format_error(edited([](auto& j) { j["model"]["vocab"]["neg"] = -3; }), "out of range");
  expect_format_error(edited([](auto& j) { j["added_tokens"][0]["special"] = "yes"; }),
                      "'special' is not a boolean");
  expect_format_error(edited([](auto& j) {
                        j["post_processor"] = {{"type", "TemplateProcessing"}};
                      }),
                      "post_processor");
  expect_format_error(edited([](auto& j) { j["model"]["vocab"] = 3; }), "model.vocab");
  expect_format_error("{\"a\": \"\xFF\"}", "UTF-8");
  EXPECT_THROW(Tokenizer::from_file("/nonexistent/tokenizer.json"), InputError);
  EXPECT_THROW(Tokenizer::from_model_dir("/nonexistent"), InputError);
}

// ---- The commands.

test::CommandResult qwen3(const std::string& args) {
  return test::run_command(kQwen3 + " " + args);
}

TEST(TokenizerCli, TokenizeAndDetokenize) {
  const std::string model = "--model " + kTokenizerJson.parent_path().string();
  auto r = qwen3("tokenize " + model + " 'Hello world<|im_end|>'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[9707,1879,151645]\n");

  const auto dir = test::make_temp_dir("tokenize-cli");
  test::write_file(dir / "texts.json", R"(["Hello world", "", "<think>\nnaïve café\n</think>"])");
  r = qwen3("tokenize --tokenizer " + kTokenizerJson.string() + " --batch-json " +
            (dir / "texts.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto ids = nlohmann::json::parse(r.out);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], nlohmann::json::array({9707, 1879}));
  EXPECT_EQ(ids[1], nlohmann::json::array());

  test::write_file(dir / "ids.json", ids.dump());
  r = qwen3("detokenize " + model + " --batch-json " + (dir / "ids.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out),
            nlohmann::json::array({"Hello world", "", "<think>\nnaïve café\n</think>"}));
  r = qwen3("detokenize " + model + " --ids 151644,9707,151645 --skip-special-tokens");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "\"Hello\"\n");

  // Bad input: clear one-line errors, exit code 1 (2 for a bad command line).
  auto expect_error = [](const test::CommandResult& result, const std::string& needle) {
    EXPECT_EQ(result.exit_code, 1) << result.out;
    EXPECT_NE(result.err.find(needle), std::string::npos) << result.err;
    EXPECT_TRUE(result.out.empty()) << result.out;
  };
  test::write_file(dir / "bad.txt", "abc\xFE");
  expect_error(qwen3("tokenize " + model + " --text-file " + (dir / "bad.txt").string()), "not valid UTF-8");
  test::write_file(dir / "huge.txt", std::string(Tokenizer::kMaxTextBytes + 1, 'a'));
  expect_error(qwen3("tokenize " + model + " --text-file " + (dir / "huge.txt").string()),
               "over the tokenizer's limit");
  test::write_file(dir / "not_strings.json", "[\"a\", 3]");
  expect_error(qwen3("tokenize " + model + " --batch-json " + (dir / "not_strings.json").string()),
               "element 1 is not a string");
  test::write_file(dir / "broken.json", "[\"a\", ");
  expect_error(qwen3("tokenize " + model + " --batch-json " + (dir / "broken.json").string()),
               "invalid JSON");
  test::write_file(dir / "bad_ids.json", "[[1, 2], [151669]]");
  expect_error(qwen3("detokenize " + model + " --batch-json " + (dir / "bad_ids.json").string()),
               "out of range");
  test::write_file(dir / "not_ids.json", "[[1, \"x\"]]");
  expect_error(qwen3("detokenize " + model + " --batch-json " + (dir / "not_ids.json").string()),
               "not a token id");
  expect_error(qwen3("tokenize --model " + dir.string() + " hi"), "tokenizer.json does not exist");
  expect_error(qwen3("tokenize hi"), "--model DIR or --tokenizer FILE");
  test::write_file(dir / "tokenizer.json", "{\"model\": 1}");
  expect_error(qwen3("tokenize --model " + dir.string() + " hi"), "tokenizer.json");
  EXPECT_EQ(qwen3("tokenize " + model + " --tokenizer x hi").exit_code, 2);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace qwen3
