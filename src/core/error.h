// Errors that carry a message meant for the user. Every bad input (file, flag, request) ends in one of these,
// which the CLI prints as "error: <message>" with a non-zero exit; nothing in the project aborts on bad input.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace qwen3 {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message) : std::runtime_error(std::move(message)) {}
};

// A malformed or inconsistent file (checkpoint, config, tokenizer).
class FormatError : public Error {
 public:
  using Error::Error;
};

// A request the model cannot serve (ids out of range, prompt longer than the context).
class InputError : public Error {
 public:
  using Error::Error;
};

}  // namespace qwen3

#define QWEN3_CHECK_INPUT(cond, msg)         \
  do {                                       \
    if (!(cond)) throw ::qwen3::InputError(msg); \
  } while (0)
