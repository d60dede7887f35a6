// libFuzzer target: the YAML loader. Any input either loads or fails with a
// config_error naming the place; nothing else may escape, and nothing may
// crash or hang.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto cfg = tokengate::config::load_config_text(text, "fuzz.yaml");
    if (cfg->listeners.empty()) std::abort();  // the loader promises at least one
  } catch (const tokengate::config::config_error& e) {
    if (std::string_view(e.what()).rfind("fuzz.yaml", 0) != 0)
      std::abort();  // errors name the file
  }
  return 0;
}
