// The WebSocket routes: which protocol adapter speaks at which path.
#include "server/stream_protocol.h"

#include "server/deepgram_adapter.h"
#include "server/wlk_adapter.h"

namespace earshot::server {

std::unique_ptr<StreamProtocol> make_stream_protocol(const std::string& path, Core& core) {
  if (path == "/asr") return make_wlk_protocol(core);
  if (path == "/v1/listen") return make_deepgram_protocol(core);
  return nullptr;
}

}  // namespace earshot::server
