// ITU-T G.711 companded samples (µ-law and A-law, one byte each, 8 kHz in
// telephony): what phone gateways and voice-agent platforms send (Deepgram's
// encoding=mulaw|alaw, OpenAI Realtime's audio/pcmu and audio/pcma). Decoding
// is the standard's expansion to 16-bit linear PCM, exactly.
#pragma once

#include <cstdint>

namespace earshot::audio {

enum class G711Law { kMu, kA };

// µ-law: the byte is stored inverted; 3 exponent bits and 4 mantissa bits give
// a magnitude of ((mantissa << 3) + 0x84) << exponent, less the bias 0x84;
// the sign bit set means negative. Range -32124..32124.
constexpr int16_t mulaw_to_linear(uint8_t byte) {
  const int u = static_cast<uint8_t>(~byte);
  const int exponent = (u >> 4) & 7;
  const int magnitude = ((((u & 0x0F) << 3) + 0x84) << exponent) - 0x84;
  return static_cast<int16_t>((u & 0x80) ? -magnitude : magnitude);
}

// A-law: every other bit is stored inverted (xor 0x55); a zero exponent is the
// linear segment ((mantissa << 4) + 8), the others ((mantissa << 4) + 0x108) <<
// (exponent - 1); the sign bit set means positive. Range -32256..32256.
constexpr int16_t alaw_to_linear(uint8_t byte) {
  const int a = byte ^ 0x55;
  const int exponent = (a >> 4) & 7;
  const int mantissa = a & 0x0F;
  const int magnitude = exponent == 0 ? (mantissa << 4) + 8 : ((mantissa << 4) + 0x108) << (exponent - 1);
  return static_cast<int16_t>((a & 0x80) ? magnitude : -magnitude);
}

constexpr int16_t g711_to_linear(uint8_t byte, G711Law law) {
  return law == G711Law::kMu ? mulaw_to_linear(byte) : alaw_to_linear(byte);
}

// The sample as a float in [-1, 1) (linear / 32768, as 16-bit PCM is read elsewhere).
constexpr float g711_to_float(uint8_t byte, G711Law law) {
  return static_cast<float>(g711_to_linear(byte, law)) / 32768.0f;
}

}  // namespace earshot::audio
