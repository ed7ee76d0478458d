// qwen3 run --model DIR (--prompt TEXT | --prompt-ids 1,2,3) [--system TEXT] [--no-think] [--raw]
//           [--tokenizer FILE] [sampling flags] [--print-ids] [--special] [--verbose-prompt]
// Generates from one prompt. stdout carries only the reply, streamed token by token; statistics go to stderr.
//
// What stdout holds, chosen to match what llama.cpp's llama-cli and vLLM users see:
// - The text of the generated ids as transformers' `tokenizer.decode(ids, skip_special_tokens=True)` gives it
//   (vLLM's default): special tokens such as <|im_end|> are left out unless --special (llama-cli's flag).
// - The reasoning is printed as the model writes it, between <think> and </think>: those are added tokens
// that
//   are not special, so they stay, as in llama-cli's output and in vLLM's content without a reasoning parser.
//   Nothing is added or taken away, so piped output is byte for byte the decoded text (the text-level end to
//   end test compares it with transformers). `qwen3 chat` is where reasoning and content are told apart.
// - On a terminal a final newline is added when the reply does not end with one, so the shell prompt starts
// on
//   its own line; piped output gets none.
// - --print-ids prints the generated ids instead of the text (one line, space separated).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/common.h"
#include "core/error.h"

namespace qwen3::cli {
namespace {

struct RunFlags {
  ModelOptions model;
  SamplingFlags sampling;
  std::string prompt;
  std::string ids_text;
  std::string system;
  std::string tokenizer_file;
  bool raw = false;
  bool no_think = false;
  bool print_ids = false;
  bool special = false;
  bool verbose_prompt = false;
};

// The chat-template prompt for one user message (and a system message when given).
std::string render_single_turn(const ChatTemplate& chat_template, const RunFlags& f, bool with_system) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (with_system) messages.push_back({{"role", "system"}, {"content", f.system}});
  messages.push_back({{"role", "user"}, {"content", f.prompt}});
  ChatTemplateOptions options;
  if (f.no_think) options.kwargs["enable_thinking"] = false;
  return chat_template.render(normalize_chat_messages(messages), options);
}

void write_stdout(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
}

}  // namespace

void register_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Generate a reply to a prompt, streamed to stdout");
  auto flags = std::make_shared<RunFlags>();
  add_model_options(*cmd, flags->model);
  add_sampling_flags(*cmd, flags->sampling);
  add_tokenizer_option(*cmd, flags->tokenizer_file);
  auto* prompt_option = cmd->add_option(
      "--prompt,-p", flags->prompt, "The user's message (UTF-8); the chat template is applied unless --raw");
  auto* ids_option = cmd->add_option("--prompt-ids", flags->ids_text, "Prompt token ids, comma separated");
  auto* system_option = cmd->add_option("--system", flags->system, "A system message before the prompt");
  auto* raw_option =
      cmd->add_flag("--raw", flags->raw, "Use --prompt as the model's input, without the template");
  auto* no_think_option = cmd->add_flag(
      "--no-think", flags->no_think,
      "Render with enable_thinking=false (the model card suggests --temperature 0.7 --top-p 0.8 then)");
  cmd->add_flag("--print-ids", flags->print_ids, "Print generated token ids, space separated, on one line");
  cmd->add_flag("--special", flags->special,
                "Print special tokens (<|im_end|> ...) instead of leaving them out");
  cmd->add_flag("--verbose-prompt", flags->verbose_prompt,
                "Print the prompt and its token ids to stderr before generating");
  prompt_option->excludes(ids_option);
  ids_option->excludes(prompt_option);
  for (CLI::Option* text_only : {system_option, raw_option, no_think_option}) ids_option->excludes(text_only);
  raw_option->excludes(system_option)->excludes(no_think_option);

  cmd->callback([flags, prompt_option, system_option] {
    const RunFlags& f = *flags;
    const bool from_text = prompt_option->count() > 0;
    if (!from_text && f.ids_text.empty())
      throw InputError("run: give the prompt with --prompt TEXT or --prompt-ids 1,2,3");

    // The text side first: a bad prompt, tokenizer or template fails before a large model is read.
    std::optional<Tokenizer> tokenizer;
    std::vector<int32_t> prompt_ids;
    const bool templated = from_text && !f.raw;
    if (from_text) {
      require_valid_utf8(f.prompt, "--prompt");
      require_valid_utf8(f.system, "--system");
      tokenizer.emplace(load_checkpoint_tokenizer(f.model.model_dir, f.tokenizer_file));
      std::string prompt = f.prompt;
      if (templated)
        prompt = render_single_turn(load_checkpoint_template(f.model.model_dir, f.tokenizer_file), f,
                                    system_option->count() > 0);
      prompt_ids = tokenizer->encode(prompt);  // added tokens (<|im_start|> ...) are matched as single ids
      if (f.verbose_prompt) std::cerr << "prompt (" << prompt_ids.size() << " tokens):\n" << prompt << "\n";
    } else {
      prompt_ids = parse_id_list(f.ids_text);
      if (!f.print_ids) {
        if (!f.tokenizer_file.empty() || checkpoint_has_tokenizer(f.model.model_dir, ""))
          tokenizer.emplace(load_checkpoint_tokenizer(f.model.model_dir, f.tokenizer_file));
        else
          std::cerr << "note: no tokenizer.json in " << f.model.model_dir << ": printing token ids\n";
      }
    }
    if (f.verbose_prompt) std::cerr << "prompt ids: " << join_ids(prompt_ids) << "\n";

    LoadedModel m = load_model(f.model);
    const SamplingFallback fallback = templated ? qwen3_chat_sampling(!f.no_think) : SamplingFallback{};
    const GenerateOptions options = resolve_generate_options(f.sampling, *m.checkpoint, fallback);

    const bool print_text = tokenizer.has_value() && !f.print_ids;
    // The model's embedding table is often wider than the tokenizer's vocabulary (151936 vs 151669 for
    // Qwen3); ids past it decode to nothing, as in transformers.
    std::optional<StreamDecoder> decoder;
    if (print_text)
      decoder.emplace(*tokenizer, /*skip_special_tokens=*/!f.special, /*ignore_unknown_ids=*/true);
    char last_char = '\n';
    auto emit = [&](const std::string& piece) {
      if (piece.empty()) return;
      write_stdout(piece);
      last_char = piece.back();
    };
    bool first = true;
    const GenerateResult result = generate(*m.backend, prompt_ids, options, [&](int32_t token) {
      // Flushed per token, so a long run shows progress and a killed run keeps what it printed.
      if (print_text) {
        emit(decoder->push(token));
      } else {
        std::printf(first ? "%d" : " %d", token);
      }
      std::fflush(stdout);
      first = false;
      return true;
    });
    if (print_text) {
      emit(decoder->finish());
      if (last_char != '\n' && ::isatty(STDOUT_FILENO)) write_stdout("\n");
    } else {
      write_stdout("\n");
    }
    std::fflush(stdout);

    const double decode_tokens = double(result.tokens.size()) - 1;
    std::fprintf(stderr,
                 "[%s] prompt %lld tokens, %.1f tok/s prefill; generated %zu tokens, %.2f tok/s decode; %s\n",
                 m.backend->name().c_str(), (long long)result.prompt_tokens,
                 double(result.prompt_tokens) / std::max(result.prefill_seconds, 1e-9), result.tokens.size(),
                 decode_tokens > 0 ? decode_tokens / std::max(result.decode_seconds, 1e-9) : 0.0,
                 finish_reason_name(result.finish_reason).c_str());
  });
}

}  // namespace qwen3::cli
