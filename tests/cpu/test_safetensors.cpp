#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace qwen3 {
namespace {

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// Expects parse_safetensors to reject the image with a message containing `needle`.
void expect_bad(const std::string& image, const std::string& needle) {
  try {
    parse_safetensors(as_bytes(image));
    FAIL() << "accepted a malformed file (expected: " << needle << ")";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

const std::string kTwoTensors =
    R"({"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})";

TEST(Safetensors, ParsesValidFile) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]},)"
      R"("a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},"e":{"dtype":"I8","shape":[0],"data_offsets":[20,20]}})";
  const auto h = parse_safetensors(as_bytes(test::safetensors_image(header, std::string(20, 'x'))));
  ASSERT_EQ(h.entries.size(), 3u);
  EXPECT_EQ(h.entries[0].name, "a");  // sorted by data offset
  EXPECT_EQ(h.entries[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h.entries[1].name, "b");
  EXPECT_EQ(h.metadata.at("format"), "pt");
  // Trailing spaces pad real headers to 8 bytes.
  EXPECT_NO_THROW(parse_safetensors(as_bytes(test::safetensors_image(kTwoTensors + "   ", std::string(20, 'x')))));
  // An empty file of tensors is valid.
  EXPECT_NO_THROW(parse_safetensors(as_bytes(test::safetensors_image("{}", ""))));
}

TEST(Safetensors, RejectsTruncatedAndLyingLengths) {
  expect_bad("", "too small");
  expect_bad(std::string(7, '\0'), "too small");
  expect_bad(test::safetensors_image(kTwoTensors, std::string(20, 'x'), 100'000'001), "exceeds the limit");
  expect_bad(test::safetensors_image(kTwoTensors, std::string(20, 'x'), int64_t(1) << 62), "exceeds the limit");
  expect_bad(test::safetensors_image(kTwoTensors, "", int64_t(kTwoTensors.size()) + 5), "past the end");
  expect_bad(test::safetensors_image(kTwoTensors, std::string(19, 'x')), "file size mismatch");
  expect_bad(test::safetensors_image(kTwoTensors, std::string(21, 'x')), "file size mismatch");
}

TEST(Safetensors, RejectsBadJson) {
  expect_bad(test::safetensors_image("{\"a\":", ""), "not valid JSON");
  expect_bad(test::safetensors_image("[]", ""), "JSON object");
  expect_bad(test::safetensors_image("\xff\xfe", ""), "not valid JSON");
  expect_bad(test::safetensors_image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                     R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                     std::string(8, 'x')),
             "duplicate key 'a'");
  expect_bad(test::safetensors_image(R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                     std::string(4, 'x')),
             "duplicate key 'dtype'");
  expect_bad(test::safetensors_image(R"({"a":{"dtype":"F32","shape":[[[[1]]]],"data_offsets":[0,4]}})",
                                     std::string(4, 'x')),
             "nested too deeply");
  expect_bad(test::safetensors_image(std::string(100000, '[') , ""), "nested too deeply");
}

TEST(Safetensors, RejectsBadEntries) {
  auto one = [](const std::string& entry, size_t data) {
    return test::safetensors_image(R"({"t":)" + entry + "}", std::string(data, 'x'));
  };
  expect_bad(one(R"({"dtype":"Q4","shape":[1],"data_offsets":[0,1]})", 1), "unknown dtype 'Q4'");
  expect_bad(one(R"({"shape":[1],"data_offsets":[0,1]})", 1), "missing dtype");
  expect_bad(one(R"({"dtype":"U8","data_offsets":[0,1]})", 1), "missing shape");
  expect_bad(one(R"({"dtype":"U8","shape":[1]})", 1), "data_offsets");
  expect_bad(one(R"({"dtype":"U8","shape":[1],"data_offsets":[0]})", 1), "data_offsets");
  expect_bad(one(R"({"dtype":"U8","shape":[-1],"data_offsets":[0,1]})", 1), "non-negative");
  expect_bad(one(R"({"dtype":"U8","shape":[1.5],"data_offsets":[0,1]})", 1), "non-negative");
  expect_bad(one(R"({"dtype":"U8","shape":[1],"data_offsets":[-1,0]})", 1), "non-negative");
  expect_bad(one(R"({"dtype":"U8","shape":[1],"data_offsets":[1,0]})", 1), "end < begin");
  expect_bad(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})", 4), "needs 8");
  expect_bad(one(R"({"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1})", 1), "unknown field");
  expect_bad(one(R"("x")", 0), "must be an object");
  // numel overflows u64
  expect_bad(one(R"({"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,1]})", 1), "overflows");
  // numel fits but numel * 8 does not
  expect_bad(one(R"({"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]})", 8), "overflows");
  expect_bad(test::safetensors_image(R"({"__metadata__":{"k":1}})", ""), "must be a string");
  expect_bad(test::safetensors_image(R"({"__metadata__":[]})", ""), "__metadata__");
}

TEST(Safetensors, RejectsNonContiguousOffsets) {
  // A gap between tensors.
  expect_bad(test::safetensors_image(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                     R"("b":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}})",
                                     std::string(10, 'x')),
             "contiguous");
  // Overlap.
  expect_bad(test::safetensors_image(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                     R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                                     std::string(6, 'x')),
             "contiguous");
  // Not starting at 0.
  expect_bad(test::safetensors_image(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", std::string(8, 'x')),
             "expected 0");
  // Two tensors aliasing the same bytes.
  expect_bad(test::safetensors_image(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                                     R"("b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                                     std::string(4, 'x')),
             "contiguous");
}

TEST(Safetensors, FileViewsPointIntoData) {
  const auto dir = test::make_temp_dir("st");
  std::string data(20, '\0');
  const float b_values[2] = {1.5f, -2.0f};
  std::memcpy(data.data() + 12, b_values, 8);
  // A 1-byte header padding shift makes "b" misaligned in memory: the reader must copy it, not misread it.
  test::write_file(dir / "x.safetensors", test::safetensors_image(kTwoTensors + " ", data));
  SafetensorsFile file(dir / "x.safetensors");
  const TensorView& b = file.tensors().at("b");
  EXPECT_EQ(b.dtype, DType::F32);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % 4, 0u);
  EXPECT_EQ(static_cast<const float*>(b.data)[0], 1.5f);
  EXPECT_EQ(static_cast<const float*>(b.data)[1], -2.0f);
  // Errors from files name the file.
  test::write_file(dir / "bad.safetensors", "garbage");
  try {
    SafetensorsFile bad(dir / "bad.safetensors");
    FAIL();
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.safetensors"), std::string::npos);
  }
  EXPECT_THROW(SafetensorsFile(dir / "missing.safetensors"), FormatError);
  std::filesystem::remove_all(dir);
}

TEST(Checkpoint, ShardIndexIsValidated) {
  const auto dir = test::make_temp_dir("ckpt");
  const std::string config =
      R"({"architectures":["Qwen3ForCausalLM"],"hidden_size":4,"intermediate_size":8,"num_hidden_layers":1,)"
      R"("num_attention_heads":1,"head_dim":4,"vocab_size":3})";
  test::write_file(dir / "config.json", config);
  EXPECT_THROW(Checkpoint::open(dir), FormatError);  // no weights at all
  test::write_file(dir / "s1.safetensors",
                   test::safetensors_image(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x"));
  test::write_file(dir / "s2.safetensors",
                   test::safetensors_image(R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "y"));
  test::write_file(dir / "model.safetensors.index.json",
                   R"({"metadata":{},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
  auto ckpt = Checkpoint::open(dir);
  EXPECT_EQ(ckpt->tensors().size(), 2u);
  EXPECT_EQ(ckpt->shard_count(), 2u);

  auto expect_index_error = [&](const std::string& index, const std::string& needle) {
    test::write_file(dir / "model.safetensors.index.json", index);
    try {
      Checkpoint::open(dir);
      FAIL() << "accepted index " << index;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_index_error(R"({"weight_map":{"a":"s2.safetensors"}})", "does not contain it");
  expect_index_error(R"({"weight_map":{"a":"../s1.safetensors"}})", "plain file name");
  expect_index_error(R"({"weight_map":{"a":"/etc/passwd"}})", "plain file name");
  expect_index_error(R"({"weight_map":{"a":"nope.safetensors"}})", "nope.safetensors");
  expect_index_error(R"({"weight_map":{}})", "no weight_map");
  expect_index_error(R"({"weight_map":{"a":"s1.safetensors","b":"s1.safetensors"}})", "does not contain");
  expect_index_error("not json", "not a valid JSON");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace qwen3
