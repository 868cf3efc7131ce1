// Deepgram Flux's live API at /v2/listen over a StreamProtocol (protocol/deepgram/flux.h):
// linear16 (or a container FFmpeg decodes) in, Connected then TurnInfo messages out,
// from the turn stage's events. The stream's eot_threshold, eager_eot_threshold and
// eot_timeout_ms go to the turn stage; a server without it (--turn-detection off)
// refuses the route. Client messages: CloseStream (the stream ends, the open turn with
// it), ForceEndTurn (the session flushes; the turn ends on the flush), KeepAlive, and
// Configure, answered ConfigureFailure (a stream keeps its connection's thresholds;
// reconnect to change them, as LiveKit's plugin does).
#pragma once

#include <memory>

#include "server/stream_protocol.h"

namespace earshot::server {

class Core;

std::unique_ptr<StreamProtocol> make_flux_protocol(Core& core);

}  // namespace earshot::server
