#include "core/peaks.h"

#include <algorithm>
#include <exception>

#include "core/config.h"

namespace qwen3 {

std::vector<std::pair<std::filesystem::path, nlohmann::json>> measured_peaks(
    const std::vector<std::filesystem::path>& dirs, const std::string& gpu_name) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const fs::path& dir : dirs) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("peaks-", 0) == 0 && entry.path().extension() == ".json") files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() > b.filename(); });
  std::vector<std::pair<fs::path, nlohmann::json>> peaks;
  for (const fs::path& file : files) {
    try {
      nlohmann::json j = nlohmann::json::parse(read_text_file(file));
      if (j.is_object() && j.value("gpu", std::string()) == gpu_name) peaks.emplace_back(file, std::move(j));
    } catch (const std::exception&) {
      // (a file that does not parse is left out: an older one may still be good)
    }
  }
  return peaks;
}

}  // namespace qwen3
