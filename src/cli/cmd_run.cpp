// qwen3 run --model DIR --prompt-ids 1,2,3 --max-tokens N [sampling flags] --print-ids
// Generates from a prompt. stdout carries only the generated ids; statistics go to stderr.
#include <cstdio>
#include <iostream>

#include "cli/common.h"
#include "core/error.h"

namespace qwen3::cli {

void register_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Generate from a prompt");
  auto model = std::make_shared<ModelOptions>();
  auto sampling = std::make_shared<SamplingFlags>();
  auto ids_text = std::make_shared<std::string>();
  auto print_ids = std::make_shared<bool>(false);
  add_model_options(*cmd, *model);
  add_sampling_flags(*cmd, *sampling);
  cmd->add_option("--prompt-ids", *ids_text, "Prompt token ids, comma separated");
  cmd->add_flag("--print-ids", *print_ids, "Print generated token ids, space separated, on one line");
  cmd->callback([model, sampling, ids_text, print_ids] {
    if (ids_text->empty()) throw InputError("run: give the prompt with --prompt-ids");
    const std::vector<int32_t> ids = parse_id_list(*ids_text);
    LoadedModel m = load_model(*model);
    const GenerateOptions options = resolve_generate_options(*sampling, *m.checkpoint);
    bool first = true;
    const GenerateResult result = generate(*m.backend, ids, options, [&](int32_t token) {
      // Streamed as generated, so a long run shows progress and a killed run keeps what it printed.
      std::cout << (first ? "" : " ") << token << std::flush;
      first = false;
      return true;
    });
    (void)print_ids;  // ids are the only output until the tokenizer lands; the flag keeps scripts stable
    std::cout << "\n";
    const double decode_tokens = double(result.tokens.size()) - 1;
    std::fprintf(stderr, "[%s] prompt %lld tokens, %.1f tok/s prefill; generated %zu tokens, %.2f tok/s decode; %s\n",
                 m.backend->name().c_str(), (long long)result.prompt_tokens,
                 double(result.prompt_tokens) / std::max(result.prefill_seconds, 1e-9), result.tokens.size(),
                 decode_tokens > 0 ? decode_tokens / std::max(result.decode_seconds, 1e-9) : 0.0,
                 finish_reason_name(result.finish_reason).c_str());
  });
}

}  // namespace qwen3::cli
