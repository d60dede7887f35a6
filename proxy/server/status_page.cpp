#include "server/status_page.hpp"

namespace tokengate {

const page_asset* find_page_asset(std::string_view path) {
  for (std::size_t i = 0; i < status_page_asset_count; ++i)
    if (status_page_assets[i].path == path) return &status_page_assets[i];
  return nullptr;
}

std::string_view content_type_of(const page_asset& asset) {
  if (asset.kind == "html") return "text/html; charset=utf-8";
  if (asset.kind == "js") return "text/javascript; charset=utf-8";
  return "text/css; charset=utf-8";
}

}  // namespace tokengate
