// The rules of torch_npu/csrc/runtime/env_settings.h.
#include "torch_npu/csrc/runtime/env_settings.h"

#include <c10/util/Exception.h>

#include <cerrno>
#include <cstdlib>

namespace torch_npu {
namespace env_settings {

std::optional<std::string> read(const char* name) {
  const char* raw = std::getenv(name);
  if (raw == nullptr || *raw == '\0') return std::nullopt;
  return std::string(raw);
}

void refuse(const char* name, const std::string& value, const std::string& accepted) {
  TORCH_CHECK(false, name, "='", value, "' is not valid: ", name, " must be ", accepted);
}

std::optional<int64_t> parse_integer(const std::string& text, int64_t minimum, int64_t maximum) {
  size_t digits_from = !text.empty() && text[0] == '-' ? 1 : 0;
  if (text.size() == digits_from) return std::nullopt;
  for (size_t i = digits_from; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
  }
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || *end != '\0') return std::nullopt;
  if (value < minimum || value > maximum) return std::nullopt;
  return static_cast<int64_t>(value);
}

int64_t read_integer(const char* name, int64_t fallback, int64_t minimum, int64_t maximum,
                     const std::string& accepted) {
  std::optional<std::string> raw = read(name);
  if (!raw) return fallback;
  std::optional<int64_t> value = parse_integer(*raw, minimum, maximum);
  if (!value) refuse(name, *raw, accepted);
  return *value;
}

}  // namespace env_settings
}  // namespace torch_npu
