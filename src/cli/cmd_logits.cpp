// qwen3 logits --model DIR --prompt-ids 1,2,3 [--json]: one forward pass over the prompt; the last position's
// logits and the argmax at every position. The golden tests compare this against transformers.
#include <charconv>
#include <cmath>
#include <iostream>

#include "cli/common.h"
#include "model/sampler.h"

namespace qwen3::cli {
namespace {

void print_float(std::ostream& os, float v) {
  char buffer[32];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), v);  // shortest round-trip form
  (void)ec;
  if (!std::isfinite(v)) {
    os << "null";  // JSON has no NaN/Inf; a non-finite logit is a bug the reader must see
    return;
  }
  os.write(buffer, end - buffer);
}

}  // namespace

void register_logits(CLI::App& app) {
  auto* cmd = app.add_subcommand("logits", "Run the prompt once; print last-position logits and per-position argmax");
  auto model = std::make_shared<ModelOptions>();
  auto ids_text = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  add_model_options(*cmd, *model);
  cmd->add_option("--prompt-ids", *ids_text, "Prompt token ids, comma separated")->required();
  cmd->add_flag("--json", *as_json, "Print {\"logits\": [...], \"argmax\": [...]}");
  cmd->callback([model, ids_text, as_json] {
    const std::vector<int32_t> ids = parse_id_list(*ids_text);
    LoadedModel m = load_model(*model);
    validate_prompt(*m.backend, ids);
    ForwardOutput out;
    m.backend->forward(ids, /*want_argmax_per_position=*/true, out);
    if (*as_json) {
      std::cout << "{\"logits\":[";
      for (size_t i = 0; i < out.last_logits.size(); ++i) {
        if (i) std::cout << ',';
        print_float(std::cout, out.last_logits[i]);
      }
      std::cout << "],\"argmax\":[";
      for (size_t i = 0; i < out.argmax.size(); ++i) std::cout << (i ? "," : "") << out.argmax[i];
      std::cout << "]}\n";
      return;
    }
    std::cout << "argmax:";
    for (int32_t a : out.argmax) std::cout << ' ' << a;
    std::cout << "\nlast position: argmax " << argmax(out.last_logits) << ", logit "
              << out.last_logits[size_t(argmax(out.last_logits))] << "\n";
  });
}

}  // namespace qwen3::cli
