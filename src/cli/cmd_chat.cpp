// qwen3 chat --model DIR [--system TEXT] [--no-think] [--tokenizer FILE] [--verbose-prompt] [sampling flags]
// An interactive multi-turn chat in the terminal: reads one line per user turn from stdin (a terminal or a
// pipe), streams the reply to stdout and keeps the conversation. stdout carries only the replies, each
// followed by a newline (reasoning shown between <think> and </think>, dimmed on a terminal); the prompt
// marker, command answers and errors go to stderr, so `qwen3 chat < questions.txt > replies.txt` keeps the
// replies alone.
//
// Commands are lines holding a single word that starts with '/' (see kHelp). Anything else is a message,
// passed through as typed: Qwen3's own soft switch, /think or /no_think inside a message, keeps working.
// Ctrl-C while a reply streams stops that reply (it stays in the history as far as it got); Ctrl-C at the
// prompt, Ctrl-D (end of input) or /exit quit with status 0.
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "core/error.h"
#include "text/jinja.h"
#include "text/reply_parser.h"
#include "text/unicode.h"

namespace qwen3::cli {
namespace {

constexpr const char* kHelp =
    "commands:\n"
    "  /reset     start a new conversation (the --system message stays)\n"
    "  /think     let the model think before it answers (the default unless --no-think)\n"
    "  /no_think  answer without thinking (the template's enable_thinking=false)\n"
    "  /stats     tokens and speed of the last reply\n"
    "  /help      this list\n"
    "  /exit      quit (also /quit, Ctrl-D, or Ctrl-C at the prompt)\n"
    "Ctrl-C while a reply streams stops that reply. /think or /no_think inside a message is passed to the\n"
    "model (Qwen3's per-turn switch).\n";

// Set by SIGINT, read by the token callback and the line reader. A lock-free atomic is async-signal-safe.
std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_sigint(int) {
  g_interrupted.store(true);
}

void install_sigint_handler() {
  struct sigaction action {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a read or poll blocked at the prompt returns EINTR at once
  sigaction(SIGINT, &action, nullptr);
}

// Lines from stdin through read(2), so that Ctrl-C at the prompt is noticed (std::getline would retry or fail
// without saying why). Works the same on a terminal, a pipe or a file.
class StdinLines {
 public:
  enum class Status { kLine, kEndOfInput, kInterrupted };

  Status next(std::string& line) {
    while (true) {
      const size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        line.assign(buffer_, 0, newline);
        buffer_.erase(0, newline + 1);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return Status::kLine;
      }
      if (end_of_input_) {
        if (buffer_.empty()) return Status::kEndOfInput;
        line = std::move(buffer_);  // a last line without its newline
        buffer_.clear();
        return Status::kLine;
      }
      if (g_interrupted.load()) return Status::kInterrupted;
      if (buffer_.size() > kMaxLineBytes) throw InputError("an input line is longer than 64 MiB");
      pollfd stdin_poll{STDIN_FILENO, POLLIN, 0};
      // A SIGINT delivered to another thread does not interrupt poll: wake up now and then to look at the
      // flag.
      const int ready = ::poll(&stdin_poll, 1, 200);
      if (ready < 0 && errno != EINTR) throw Error(std::string("reading stdin: ") + std::strerror(errno));
      if (ready <= 0) continue;
      char chunk[1 << 16];
      const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        throw Error(std::string("reading stdin: ") + std::strerror(errno));
      }
      if (n == 0)
        end_of_input_ = true;
      else
        buffer_.append(chunk, size_t(n));
    }
  }

 private:
  static constexpr size_t kMaxLineBytes = size_t(64) << 20;
  std::string buffer_;
  bool end_of_input_ = false;
};

// Shows a streamed reply: reasoning between <think> and </think> (dimmed on a terminal), then the content.
class ReplyPrinter {
 public:
  explicit ReplyPrinter(bool color) : color_(color) {}

  void show(const ReplyDelta& delta) {
    if (!delta.reasoning.empty()) {
      if (!reasoning_opened_) {
        write(color_ ? "\x1b[2m<think>\n" : "<think>\n");
        reasoning_opened_ = true;
      }
      write(delta.reasoning);
    }
    if (!delta.content.empty()) {
      close_reasoning("\n</think>\n\n");
      write(delta.content);
    }
    std::fflush(stdout);
  }

  // The reply is over: close what is open and end the line.
  void end(const ParsedReply& reply) {
    close_reasoning(reply.reasoning_finished ? "\n</think>" : "");  // cut off while thinking: no closing tag
    write("\n");
    std::fflush(stdout);
  }

 private:
  void close_reasoning(std::string_view closing) {
    if (!reasoning_opened_ || reasoning_closed_) return;
    write(closing);
    if (color_) write("\x1b[0m");
    reasoning_closed_ = true;
  }
  static void write(std::string_view text) { std::fwrite(text.data(), 1, text.size(), stdout); }

  bool color_;
  bool reasoning_opened_ = false;
  bool reasoning_closed_ = false;
};

struct ChatFlags {
  ModelOptions model;
  SamplingFlags sampling;
  std::string system;
  std::string tokenizer_file;
  bool no_think = false;
  bool verbose_prompt = false;
};

struct ReplyStats {
  int64_t prompt_tokens = 0;
  size_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  FinishReason finish_reason = FinishReason::kLength;
};

std::string trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  const size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

bool is_command(const std::string& text) {
  return text.size() > 1 && text[0] == '/' && text.find_first_of(" \t") == std::string::npos;
}

void print_stats(const ReplyStats& s, size_t messages, bool thinking) {
  const double decode_tokens = double(s.generated_tokens) - 1;  // the first token comes out of the prefill
  std::fprintf(stderr,
               "last reply: %zu tokens, %.2f tok/s decode (%.2f s); prompt %lld tokens, %.1f tok/s prefill "
               "(%.2f s); finished: %s\nconversation: %zu messages; thinking %s\n",
               s.generated_tokens, decode_tokens > 0 ? decode_tokens / std::max(s.decode_seconds, 1e-9) : 0.0,
               s.decode_seconds, (long long)s.prompt_tokens,
               double(s.prompt_tokens) / std::max(s.prefill_seconds, 1e-9), s.prefill_seconds,
               finish_reason_name(s.finish_reason).c_str(), messages, thinking ? "on" : "off");
}

}  // namespace

void register_chat(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("chat", "Interactive multi-turn chat in the terminal (also reads piped lines)");
  auto flags = std::make_shared<ChatFlags>();
  add_model_options(*cmd, flags->model);
  add_sampling_flags(*cmd, flags->sampling);
  add_tokenizer_option(*cmd, flags->tokenizer_file);
  auto* system_option =
      cmd->add_option("--system", flags->system, "A system message opening the conversation");
  cmd->add_flag("--no-think", flags->no_think, "Start with thinking off (/think turns it on)");
  cmd->add_flag("--verbose-prompt", flags->verbose_prompt,
                "Print each turn's prompt and its token ids to stderr before generating");

  cmd->callback([flags, system_option] {
    const ChatFlags& f = *flags;
    require_valid_utf8(f.system, "--system");
    const Tokenizer tokenizer = load_checkpoint_tokenizer(f.model.model_dir, f.tokenizer_file);
    const ChatTemplate chat_template = load_checkpoint_template(f.model.model_dir, f.tokenizer_file);
    LoadedModel m = load_model(f.model);

    const nlohmann::ordered_json opening =
        system_option->count() > 0
            ? nlohmann::ordered_json::array({{{"role", "system"}, {"content", f.system}}})
            : nlohmann::ordered_json::array();
    nlohmann::ordered_json history = opening;
    bool thinking = !f.no_think;

    // One seed for the session, moved on by one each turn, so a seeded chat replays and turns still differ.
    SamplingFlags sampling = f.sampling;
    const bool seed_given = sampling.seed.has_value();
    const uint64_t base_seed =
        seed_given ? *sampling.seed
                   : uint64_t(std::chrono::high_resolution_clock::now().time_since_epoch().count());
    bool seed_announced = seed_given;
    sampling.seed = base_seed;
    resolve_generate_options(sampling, *m.checkpoint, qwen3_chat_sampling(thinking));  // bad flags fail now

    const bool interactive = ::isatty(STDIN_FILENO);
    install_sigint_handler();
    if (interactive)
      std::cerr << "qwen3 chat (" << m.backend->name() << "): /help for commands, Ctrl-C stops a reply, "
                << "Ctrl-D quits\n";

    ReplyStats last;
    bool have_last = false;
    uint64_t turn = 0;
    StdinLines input;
    std::string line;
    while (true) {
      if (interactive) std::cerr << "> " << std::flush;
      const StdinLines::Status status = input.next(line);
      if (status != StdinLines::Status::kLine) {
        if (interactive || status == StdinLines::Status::kInterrupted) std::cerr << "\n";
        break;
      }
      const std::string text = trim(line);
      if (text.empty()) continue;

      if (is_command(text)) {
        if (text == "/exit" || text == "/quit") break;
        if (text == "/reset") {
          history = opening;
          std::cerr << "[new conversation]\n";
        } else if (text == "/think" || text == "/no_think") {
          thinking = text == "/think";
          std::cerr << "[thinking " << (thinking ? "on" : "off") << "]\n";
        } else if (text == "/stats") {
          if (have_last)
            print_stats(last, history.size(), thinking);
          else
            std::cerr << "no reply yet\n";
        } else if (text == "/help") {
          std::cerr << kHelp;
        } else {
          std::cerr << "unknown command " << text << " (/help lists them)\n";
        }
        continue;
      }

      const size_t bad_byte = unicode::find_invalid_utf8(text);
      if (bad_byte != std::string::npos) {
        std::cerr << "error: the line is not valid UTF-8 (byte " << bad_byte << "); it was not sent\n";
        continue;
      }
      history.push_back({{"role", "user"}, {"content", text}});

      // The KV cache is rebuilt from the whole conversation every turn (generate() starts from an empty
      // cache): simple and always right, since the template rewrites earlier turns (it drops their
      // reasoning), at the price of prefilling the history again. Reusing the cache's common prefix is the
      // optimisation to make when long chats on the CPU become a use case.
      std::string prompt;
      std::vector<int32_t> prompt_ids;
      GenerateOptions options;
      try {
        ChatTemplateOptions template_options;
        if (!thinking) template_options.kwargs["enable_thinking"] = false;
        prompt = chat_template.render(normalize_chat_messages(history), template_options);
        prompt_ids = tokenizer.encode(prompt);
        validate_prompt(*m.backend, prompt_ids);
        sampling.seed = base_seed + turn;
        options = resolve_generate_options(sampling, *m.checkpoint, qwen3_chat_sampling(thinking));
      } catch (const InputError& e) {  // the context is full, or the template rejects the conversation
        history.erase(history.size() - 1);
        std::cerr << "error: " << e.what() << " (/reset starts a new conversation)\n";
        continue;
      } catch (const jinja::TemplateError& e) {
        history.erase(history.size() - 1);
        std::cerr << "error: " << e.what() << "\n";
        continue;
      }
      if (!seed_announced && !options.sampling.greedy()) {
        std::cerr << "seed: " << base_seed << "\n";
        seed_announced = true;
      }
      if (f.verbose_prompt)
        std::cerr << "prompt (" << prompt_ids.size() << " tokens):\n"
                  << prompt << "\nprompt ids: " << join_ids(prompt_ids) << "\n";

      ReplyStreamParser parser(
          {.starts_in_reasoning = prompt_opens_reasoning(prompt), .parse_tool_calls = false});
      StreamDecoder decoder(tokenizer, /*skip_special_tokens=*/true, /*ignore_unknown_ids=*/true);
      ReplyPrinter printer(::isatty(STDOUT_FILENO));
      g_interrupted.store(false);
      const GenerateResult result = generate(*m.backend, prompt_ids, options, [&](int32_t token) {
        printer.show(parser.push(decoder.push(token)));
        return !g_interrupted.load();
      });
      printer.show(parser.push(decoder.finish()));
      printer.show(parser.finish());
      printer.end(parser.reply());
      ++turn;

      const ParsedReply& reply = parser.reply();
      history.push_back(
          {{"role", "assistant"}, {"content", reply.content}, {"reasoning_content", reply.reasoning}});
      last = {result.prompt_tokens, result.tokens.size(), result.prefill_seconds, result.decode_seconds,
              result.finish_reason};
      have_last = true;
      if (result.finish_reason == FinishReason::kCancelled) {
        g_interrupted.store(false);
        std::cerr << "[stopped]\n";
      } else if (result.finish_reason == FinishReason::kContextFull) {
        std::cerr << "[the context is full: /reset starts a new conversation]\n";
      }
    }
    std::fflush(stdout);
  });
}

}  // namespace qwen3::cli
