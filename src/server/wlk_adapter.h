// WhisperLiveKit's /asr protocol over a StreamProtocol: a config message, then
// full or diff updates of the session's lines, then ready_to_stop; an empty
// binary frame ends the stream. Wire output unchanged from before the split.
#pragma once

#include <memory>
#include <optional>

#include "server/stream_protocol.h"

namespace earshot::server {

std::unique_ptr<StreamProtocol> make_wlk_protocol(Core& core);

}  // namespace earshot::server
