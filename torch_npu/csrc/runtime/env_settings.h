// Reading the runtime's environment variables: one rule per variable, one error format.
//
// Every variable the C++ runtime reads goes through these helpers so that a bad value
// (negative, too large for its type, not a number, trailing text) is refused with the
// same message naming the variable, the value and what it accepts, instead of being
// wrapped around, truncated or silently replaced. An empty value means "unset" for
// every variable, as `export NAME=` is commonly used to clear one.
// The Python side follows the same rules in torch_npu/_env_settings.py.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace torch_npu {
namespace env_settings {

// The variable's value, or nullopt when it is unset or empty.
std::optional<std::string> read(const char* name);

// Raises "NAME='value' is not valid: NAME must be <accepted>".
[[noreturn]] void refuse(const char* name, const std::string& value, const std::string& accepted);

// A decimal integer in [minimum, maximum] (an optional leading '-', digits, nothing else);
// nullopt for anything else, out-of-range and overflowing values included.
std::optional<int64_t> parse_integer(const std::string& text, int64_t minimum, int64_t maximum);

// The variable as an integer in [minimum, maximum], or `fallback` when unset; refuses
// anything else with `accepted` describing the rule.
int64_t read_integer(const char* name, int64_t fallback, int64_t minimum, int64_t maximum,
                     const std::string& accepted);

}  // namespace env_settings
}  // namespace torch_npu
