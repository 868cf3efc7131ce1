// The page served at / (web/index.html), embedded at build time.
#pragma once

#include <string_view>

namespace earshot::server {
std::string_view web_page();
}  // namespace earshot::server
