// OpenAI's Realtime API for transcription at /v1/realtime?intent=transcription
// over a StreamProtocol: session.created on connect; session.update (or the
// beta transcription_session.update) configures; input_audio_buffer.append
// carries base64 audio (PCM16 at 24 kHz, G.711 µ-law or A-law at 8 kHz) in JSON
// text messages, so one append is at most --max-message-kb (1 MiB by default:
// about 16 s of 24 kHz PCM16 in base64); commit and clear act on the buffer;
// the session's events come back as protocol/openai_realtime/projection.h says.
// The model stream opens with the first audio (the language, prompt and format
// are fixed then); turn_detection's settings go to the stages as parameters
// (turn_detection, turn_threshold, turn_prefix_padding_ms, turn_silence_ms,
// turn_eagerness) for a turn stage ("turns"), whose TurnStarted/TurnEnded then
// bound the items.
#pragma once

#include <memory>

#include "server/stream_protocol.h"

namespace earshot::server {

std::unique_ptr<StreamProtocol> make_realtime_protocol(Core& core);

}  // namespace earshot::server
