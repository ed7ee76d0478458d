// qwen3 logits --model DIR --prompt-ids 1,2,3 [--json]: one forward pass over the prompt; the last position's
// logits and the argmax at every position. The golden tests compare this against transformers.
// --prompts-json FILE runs several prompts with one model load (a JSON array of results).
#include <charconv>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "core/error.h"
#include "model/sampler.h"

namespace qwen3::cli {
namespace {

void print_float(std::ostream& os, float v) {
  if (!std::isfinite(v)) {
    os << "null";  // JSON has no NaN/Inf; a non-finite logit is a bug the reader must see
    return;
  }
  char buffer[32];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), v);  // shortest round-trip form
  (void)ec;
  os.write(buffer, end - buffer);
}

void print_logits_json(std::ostream& os, const ForwardOutput& out) {
  os << "{\"logits\":[";
  for (size_t i = 0; i < out.last_logits.size(); ++i) {
    if (i) os << ',';
    print_float(os, out.last_logits[i]);
  }
  os << "],\"argmax\":[";
  for (size_t i = 0; i < out.argmax.size(); ++i) os << (i ? "," : "") << out.argmax[i];
  os << "]}";
}

std::vector<std::vector<int32_t>> read_prompts_json(const std::string& path) {
  const auto j = nlohmann::json::parse(read_text_file(path), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array() || j.empty())
    throw InputError(path + ": expected a non-empty JSON array of id arrays");
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& p : j) {
    if (!p.is_array()) throw InputError(path + ": expected a JSON array of id arrays");
    std::vector<int32_t> ids;
    for (const auto& id : p) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        throw InputError(path + ": token ids must be non-negative integers");
      ids.push_back(id.get<int32_t>());
    }
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

}  // namespace

void register_logits(CLI::App& app) {
  auto* cmd = app.add_subcommand("logits", "Run the prompt once; print last-position logits and per-position argmax");
  auto model = std::make_shared<ModelOptions>();
  auto ids_text = std::make_shared<std::string>();
  auto prompts_file = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  add_model_options(*cmd, *model);
  auto* group = cmd->add_option_group("prompt");
  group->add_option("--prompt-ids", *ids_text, "Prompt token ids, comma separated");
  group->add_option("--prompts-json", *prompts_file, "JSON array of id arrays: one load, an array of results");
  group->require_option(1);
  cmd->add_flag("--json", *as_json, "Print {\"logits\": [...], \"argmax\": [...]}");
  cmd->callback([model, ids_text, prompts_file, as_json] {
    const bool many = !prompts_file->empty();
    if (many && !*as_json) throw InputError("--prompts-json needs --json");
    const std::vector<std::vector<int32_t>> prompts =
        many ? read_prompts_json(*prompts_file) : std::vector<std::vector<int32_t>>{parse_id_list(*ids_text)};
    LoadedModel m = load_model(*model);
    for (const auto& ids : prompts) validate_prompt(*m.backend, ids);
    if (many) std::cout << "[";
    for (size_t p = 0; p < prompts.size(); ++p) {
      ForwardOutput out;
      m.backend->truncate(0);
      m.backend->forward(prompts[p], /*want_argmax_per_position=*/true, out);
      if (*as_json) {
        if (p) std::cout << ",";
        print_logits_json(std::cout, out);
        continue;
      }
      std::cout << "argmax:";
      for (int32_t a : out.argmax) std::cout << ' ' << a;
      std::cout << "\nlast position: argmax " << argmax(out.last_logits) << ", logit "
                << out.last_logits[size_t(argmax(out.last_logits))] << "\n";
    }
    if (many) std::cout << "]";
    if (*as_json) std::cout << "\n";
  });
}

}  // namespace qwen3::cli
