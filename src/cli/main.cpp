// qwen3: one binary, one subcommand per job. stdout carries only results; progress and statistics go to stderr.
// Exit codes: 0 success, 1 bad input or runtime error (message on stderr), 2 bad command line.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/common.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"qwen3: a from-scratch inference engine for Qwen3 models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "qwen3 0.1.0");
  qwen3::cli::register_info(app);
  qwen3::cli::register_logits(app);
  qwen3::cli::register_run(app);
  qwen3::cli::register_tokenize(app);
  qwen3::cli::register_detokenize(app);
  qwen3::cli::register_bench(app);
  qwen3::cli::register_template(app);
  qwen3::cli::register_chat(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const qwen3::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
