#pragma once
// The status page the admin listener serves at / (docs/operations.md, "The
// status page"): its HTML, script and style (proxy/server/status_page/)
// and uPlot, the charts library npm installs there, compiled into the
// binary by scripts/embed_status_page.cmake. It holds no data: it reads
// /stats/stream and /budgets like any client, with the admin token when
// one is set, so it is served without one.
#include <cstddef>
#include <string_view>

namespace tokengate {

struct page_asset {
  std::string_view path;  // as requested: "/", "/assets/uplot.js", …
  std::string_view kind;  // "html", "js" or "css"
  std::string_view body;
};

// (Defined in the generated file.)
extern const page_asset status_page_assets[];
extern const std::size_t status_page_asset_count;

// The asset served at `path`, or null.
const page_asset* find_page_asset(std::string_view path);
std::string_view content_type_of(const page_asset& asset);

// Its Content-Security-Policy: its own scripts, styles and feeds, and
// nothing from anywhere else (no inline script, no other origin, no
// frames around it, no form sent anywhere).
inline constexpr std::string_view status_page_csp =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace tokengate
