// The WebSocket routes: the route table's stream adapters (routes.cpp).
#include "server/stream_protocol.h"

#include "server/routes.h"

namespace earshot::server {

std::unique_ptr<StreamProtocol> make_stream_protocol(const std::string& path, Core& core) {
  const Route* route = find_route(path);
  return route && route->stream ? route->stream(core) : nullptr;
}

}  // namespace earshot::server
