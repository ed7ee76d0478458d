#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace qwen3 {
namespace {

using json = nlohmann::json;

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

// Parses the header JSON, rejecting duplicate keys at any level (nlohmann would keep the last one silently) and
// nesting deeper than a safetensors header ever needs.
json parse_header_json(std::string_view text) {
  std::vector<std::set<std::string>> keys_per_object;
  std::string duplicate;
  bool too_deep = false;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > 3) too_deep = true;
    switch (event) {
      case json::parse_event_t::object_start:
        keys_per_object.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys_per_object.empty()) keys_per_object.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys_per_object.empty() && !keys_per_object.back().insert(parsed.get<std::string>()).second &&
            duplicate.empty())
          duplicate = parsed.get<std::string>();
        break;
      default:
        break;
    }
    return !too_deep;
  };
  json root;
  try {
    root = json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    if (too_deep) throw FormatError("header JSON is nested too deeply");
    throw FormatError(std::string("header is not valid JSON: ") + e.what());
  }
  if (too_deep) throw FormatError("header JSON is nested too deeply");
  if (!duplicate.empty()) throw FormatError("header has a duplicate key '" + duplicate + "'");
  if (!root.is_object()) throw FormatError("header must be a JSON object");
  return root;
}

uint64_t as_u64(const json& v, const std::string& what) {
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
    throw FormatError(what + " must be a non-negative integer");
  return v.get<uint64_t>();
}

SafetensorsEntry parse_entry(const std::string& name, const json& info) {
  const std::string where = "tensor '" + name + "'";
  if (!info.is_object()) throw FormatError(where + ": entry must be an object");
  for (const auto& [key, value] : info.items()) {
    (void)value;
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      throw FormatError(where + ": unknown field '" + key + "'");
  }
  SafetensorsEntry entry;
  entry.name = name;

  auto dtype_it = info.find("dtype");
  if (dtype_it == info.end() || !dtype_it->is_string()) throw FormatError(where + ": missing dtype");
  auto dtype = parse_dtype(dtype_it->get<std::string>());
  if (!dtype) throw FormatError(where + ": unknown dtype '" + dtype_it->get<std::string>() + "'");
  entry.dtype = *dtype;

  auto shape_it = info.find("shape");
  if (shape_it == info.end() || !shape_it->is_array()) throw FormatError(where + ": missing shape");
  uint64_t numel = 1;
  for (const auto& d : *shape_it) {
    const uint64_t dim = as_u64(d, where + ": shape entries");
    if (dim > uint64_t(INT64_MAX) || mul_overflows(numel, dim, &numel))
      throw FormatError(where + ": shape " + shape_it->dump() + " overflows");
    entry.shape.push_back(int64_t(dim));
  }

  auto offsets_it = info.find("data_offsets");
  if (offsets_it == info.end() || !offsets_it->is_array() || offsets_it->size() != 2)
    throw FormatError(where + ": data_offsets must be [begin, end]");
  entry.begin = as_u64((*offsets_it)[0], where + ": data_offsets");
  entry.end = as_u64((*offsets_it)[1], where + ": data_offsets");
  if (entry.end < entry.begin) throw FormatError(where + ": data_offsets end < begin");

  uint64_t nbytes = 0;
  if (mul_overflows(numel, dtype_size(entry.dtype), &nbytes))
    throw FormatError(where + ": byte size overflows");
  if (entry.end - entry.begin != nbytes)
    throw FormatError(where + ": data_offsets span " + std::to_string(entry.end - entry.begin) + " bytes but shape " +
                      shape_it->dump() + " of " + std::string(dtype_name(entry.dtype)) + " needs " +
                      std::to_string(nbytes));
  return entry;
}

}  // namespace

SafetensorsHeader parse_safetensors(std::span<const std::byte> file) {
  if (file.size() < 8) throw FormatError("file is too small to be safetensors (" + std::to_string(file.size()) + " bytes)");
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | uint64_t(file[size_t(i)]);
  if (header_bytes > kSafetensorsMaxHeaderBytes)
    throw FormatError("header length " + std::to_string(header_bytes) + " exceeds the limit of " +
                      std::to_string(kSafetensorsMaxHeaderBytes) + " bytes");
  if (header_bytes > file.size() - 8)
    throw FormatError("header length " + std::to_string(header_bytes) + " runs past the end of the file (" +
                      std::to_string(file.size()) + " bytes)");

  const std::string_view text(reinterpret_cast<const char*>(file.data() + 8), size_t(header_bytes));
  const json root = parse_header_json(text);

  SafetensorsHeader header;
  header.header_bytes = header_bytes;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) throw FormatError("__metadata__ must be an object of strings");
      for (const auto& [mkey, mvalue] : value.items()) {
        if (!mvalue.is_string()) throw FormatError("__metadata__ value for '" + mkey + "' must be a string");
        header.metadata[mkey] = mvalue.get<std::string>();
      }
      continue;
    }
    header.entries.push_back(parse_entry(key, value));
  }

  // Data must be one contiguous run of tensors from offset 0: sort by (begin, end) and chain.
  std::sort(header.entries.begin(), header.entries.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected_begin = 0;
  for (const auto& entry : header.entries) {
    if (entry.begin != expected_begin)
      throw FormatError("tensor '" + entry.name + "' starts at byte " + std::to_string(entry.begin) + ", expected " +
                        std::to_string(expected_begin) + " (offsets must be contiguous and non-overlapping)");
    expected_begin = entry.end;
  }
  const uint64_t data_bytes = file.size() - 8 - header_bytes;
  if (expected_begin != data_bytes)
    throw FormatError("file size mismatch: header describes " + std::to_string(expected_begin) +
                      " data bytes but the file holds " + std::to_string(data_bytes));
  return header;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : map_(path) {
  try {
    header_ = parse_safetensors(map_.bytes());
  } catch (const FormatError& e) {
    throw FormatError(path.string() + ": " + e.what());
  }
  const std::byte* data = map_.bytes().data() + header_.data_offset();
  for (const auto& entry : header_.entries) {
    TensorView view;
    view.dtype = entry.dtype;
    view.shape = entry.shape;
    view.nbytes = entry.end - entry.begin;
    const std::byte* src = data + entry.begin;
    if (reinterpret_cast<uintptr_t>(src) % dtype_size(entry.dtype) != 0) {
      // The writer pads headers so this does not happen in practice; copy rather than read misaligned.
      auto copy = std::make_unique<std::byte[]>(std::max<uint64_t>(view.nbytes, 1));
      std::memcpy(copy.get(), src, view.nbytes);
      src = copy.get();
      aligned_copies_.push_back(std::move(copy));
    }
    view.data = src;
    tensors_.emplace(entry.name, std::move(view));
  }
}

}  // namespace qwen3
