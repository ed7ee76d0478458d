// The ceilings bench/measure_peaks measures, as it writes them: peaks-<UTC>.json files, each one GPU model's.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace qwen3 {

// The peaks-*.json files in `dirs` measured on `gpu_name` (their "gpu" field), parsed, newest first (UTC
// timestamps in the names). Files that do not parse are left out; a folder that is not there holds none. Why the
// model: bench/results holds ceilings of several (the H200 and the H100 this project is lent), and a time reported
// against another model's ceiling is off by their ratio.
std::vector<std::pair<std::filesystem::path, nlohmann::json>> measured_peaks(
    const std::vector<std::filesystem::path>& dirs, const std::string& gpu_name);

}  // namespace qwen3
