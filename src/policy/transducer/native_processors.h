// The transducers' own decoding (--policy native) and their rolling passes'
// window decoder, over the model-neutral transducer interface
// (model/transducer_stream.h). Native words are append-only, each committed as
// the next one starts, with the model's frame times; the prediction network's
// state runs across windows or chunks, and a long pause starts it afresh.
#pragma once

#include <memory>
#include <string>

#include "model/transducer_stream.h"
#include "policy/commit/revising_processor.h"
#include "policy/online_processor.h"

namespace earshot::policy {

// An offline model (Parakeet-TDT): each window of window_seconds decoded once when
// it is full (utterance-normalised features per window, the decoder state carried
// across), the rest at a pause or the end. `language`: the request's ("auto" or a code).
std::unique_ptr<OnlineProcessor> native_transducer_processor(std::unique_ptr<OfflineTransducer> stream,
                                                             double window_seconds, const std::string& language);

// A cache-aware streaming model (Nemotron streaming): each chunk encoded and
// decoded as soon as its audio is in; a segment (up to a pause or the end) is one
// encoder stream, its frame 0 at the segment's first sample.
std::unique_ptr<OnlineProcessor> streaming_transducer_processor(std::unique_ptr<StreamingTransducer> stream,
                                                                const std::string& language);

// An offline model's rolling passes (--policy rolling, behind
// commit::RevisingProcessor): every pass encodes the whole segment, its features
// normalised over it as the model expects, and decodes it greedily from the
// prediction network's state at the segment's start. The words keep their frame
// times, so committed words keep native times; the final pass's state and
// language carry into the next segment (a long pause resets them).
std::unique_ptr<commit::WindowDecoder> transducer_window_decoder(std::unique_ptr<OfflineTransducer> stream,
                                                                 const std::string& language);

}  // namespace earshot::policy
