#!/usr/bin/env python3
"""Writes the seed corpora of fuzz/corpus/ (committed; run again only to change them).

  fuzz/make_seeds.py MAKE_MODEL SHARED_DIR OUT_DIR [MAKE_PARAKEET]

MAKE_MODEL is earshot-make-model (build/release/tools/make_model/), SHARED_DIR
the shared/ folder (test model templates, the Silero file). Model seeds are kept
small so the fuzzer stays fast: the smallest Whisper model the generator writes
(width 1, f32, one layer, contexts of 1) with its vocabulary cut to 64 tokens
(the loader pads the rest), and cut versions of it and of the Silero file.
MAKE_PARAKEET (earshot-make-parakeet) writes the FastConformer seeds: whole
files of its tiny dimensions (8 mels, d_model 8, 1 layer; 11-16 KB each).
"""
import math
import os
import struct
import subprocess
import sys
import tempfile


def write(out, target, name, data):
    os.makedirs(os.path.join(out, target), exist_ok=True)
    with open(os.path.join(out, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def i32(b, off):
    return struct.unpack_from("<i", b, off)[0]


def whisper_seeds(make_model, shared, out):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.bin")
        subprocess.run([make_model, "--template", os.path.join(shared, "models", "for-tests-ggml-tiny.en.bin"),
                        "--out", path, "--type", "f32", "--n-state", "1", "--n-head", "1", "--n-layer", "1",
                        "--n-audio-ctx", "1", "--n-text-ctx", "1", "--seed", "1"], check=True,
                       stdout=subprocess.DEVNULL)
        b = open(path, "rb").read()
    # magic, 11 hparams, mel (n_mel, n_fft, floats), vocabulary (count, [len, bytes]...), tensors.
    off = 48
    off += 8 + 4 * i32(b, off) * i32(b, off + 4)
    count_at = off
    off += 4
    keep = 64
    for i in range(i32(b, count_at)):
        if i == keep:
            kept_end = off
        off += 4 + i32(b, off)
    small = b[:count_at] + struct.pack("<i", keep) + b[count_at + 4:kept_end] + b[off:]
    tensors_at = count_at + (kept_end - count_at)
    # The token embedding (51864 x 1 f32) is most of it: the whole file is ~280 KB,
    # so the corpus holds the file cut after each tensor record up to it, and the header alone.
    write(out, "whisper_model", "header_mel_vocab.bin", small[:tensors_at])
    write(out, "whisper_model", "encoder_records.bin", small[:tensors_at + 2048])
    write(out, "whisper_model", "bad_magic.bin", b"lmgg" + small[4:200])


def vad_seeds(shared, out):
    b = open(os.path.join(shared, "models", "silero-v6.2.0-ggml.bin"), "rb").read()
    # Header: magic, model_type, version, hparams; then records i32 n_dims, name_len, type, ne[], name, data.
    off = 4
    off += 4 + i32(b, off)
    off += 12 + 4 * 3
    n_layers = i32(b, off - 4)
    off += 4 * 3 * n_layers + 4 * 4
    header_end = off
    records = []
    while off < len(b):
        n_dims, name_len, ttype = struct.unpack_from("<iii", b, off)
        ne = struct.unpack_from("<%di" % n_dims, b, off + 12)
        n = 1
        for x in ne:
            n *= x
        data_at = off + 12 + 4 * n_dims + name_len
        end = data_at + n * (2 if ttype == 1 else 4)
        records.append((off, end, end - data_at))
        off = end
    write(out, "vad_model", "header.bin", b[:header_end])
    # Every record whose data is under 4 KB (the loader walks them all, then names what is missing).
    small = b[:header_end] + b"".join(b[s:e] for s, e, size in records if size < 4096)
    write(out, "vad_model", "small_records.bin", small)
    # The first record cut inside its data (a truncated download).
    write(out, "vad_model", "cut_record.bin", b[:min(records[0][1], records[0][0] + 1024) - 1])


def gguf_seeds(out):
    def s(text):
        t = text.encode()
        return struct.pack("<Q", len(t)) + t

    kvs = [(s("general.architecture"), 8, s("toy")), (s("general.name"), 8, s("toy fuzz seed")),
           (s("toy.block_count"), 4, struct.pack("<I", 1)), (s("general.alignment"), 4, struct.pack("<I", 32)),
           (s("toy.attention.layer_norm_epsilon"), 6, struct.pack("<f", 1e-5)),
           (s("tokenizer.ggml.tokens"), 9, struct.pack("<IQ", 8, 3) + s("a") + s("b") + s(" c"))]
    # name, ggml type, ne, bytes per element (f32 0, f16 1), q8_0 (8): 34 bytes per 32.
    tensors = [("token_embd.weight", 1, (32, 3), 32 * 3 * 2), ("blk.0.norm.weight", 0, (32,), 32 * 4),
               ("blk.0.q.weight", 8, (32, 2), 34 * 2)]
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, t, v in kvs:
        head += k + struct.pack("<I", t) + v
    data, infos = b"", b""
    for name, t, ne, size in tensors:
        infos += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne)
        infos += struct.pack("<IQ", t, len(data))
        data += bytes((i * 37) % 251 for i in range(size)) + b"\0" * ((-size) % 32)
    meta = head + infos
    meta += b"\0" * ((-len(meta)) % 32)
    write(out, "gguf", "toy.gguf", meta + data)
    write(out, "gguf", "toy_metadata_only.gguf", head)


def parakeet_seeds(make_parakeet, out):
    with tempfile.TemporaryDirectory() as tmp:
        def make(name, *args):
            path = os.path.join(tmp, name)
            subprocess.run([make_parakeet, "--dims", "tiny", "--seed", "1"] + list(args) + [path], check=True)
            return open(path, "rb").read()

        tdt_bin = make("tdt.bin", "--bin")
        write(out, "parakeet_model", "tdt.bin", tdt_bin)
        write(out, "parakeet_model", "tdt.gguf", make("tdt.gguf", "--gguf"))
        write(out, "parakeet_model", "streaming_rnnt.gguf", make("s.gguf", "--streaming", "1", "--gguf"))
        write(out, "parakeet_model", "prompt_streaming.gguf",
              make("p.gguf", "--streaming", "1", "--prompt", "1", "--gguf"))
        # The legacy header, filter bank, window, durations and pieces without the tensor records.
        write(out, "parakeet_model", "tdt_header.bin", tdt_bin[:1200])


def audio_seeds(out):
    with tempfile.TemporaryDirectory() as tmp:
        def ff(name, *args, rate=16000, channels=1, seconds=0.05):
            path = os.path.join(tmp, name)
            subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
                            "sine=frequency=440:sample_rate=%d:duration=%g" % (rate, seconds), "-ac", str(channels),
                            *args, path], check=True)
            return open(path, "rb").read()

        for name, args, rate, channels in [("s16_16k.wav", ["-c:a", "pcm_s16le"], 16000, 1),
                                           ("u8_8k.wav", ["-c:a", "pcm_u8"], 8000, 1),
                                           ("s24_stereo_44k.wav", ["-c:a", "pcm_s24le"], 44100, 2),
                                           ("s32_48k.wav", ["-c:a", "pcm_s32le"], 48000, 1),
                                           ("f32_22k.wav", ["-c:a", "pcm_f32le"], 22050, 1),
                                           ("f64_16k.wav", ["-c:a", "pcm_f64le"], 16000, 1),
                                           ("alaw_8k.wav", ["-c:a", "pcm_alaw"], 8000, 1),
                                           ("extensible_3ch.wav", ["-c:a", "pcm_s16le", "-rf64", "never",
                                                                   "-write_bext", "0"], 16000, 3)]:
            write(out, "wav", name, ff(name, *args, rate=rate, channels=channels, seconds=0.01))
        # The size paths (wav_size_seeds): rates below 8 kHz, sizes that claim more than
        # follows, files back to back, NaN samples.
        for name, data in wav_size_seeds().items():
            write(out, "wav", name, data)
        # Stream decoder inputs: byte 0 picks how many piece sizes follow (fuzz_input.h); then the stream.
        header = bytes([3, 5, 40, 200, 0])
        for name, args in [("opus.webm", ["-c:a", "libopus", "-b:a", "16k"]), ("vorbis.ogg", ["-c:a", "libvorbis"]),
                           ("a.mp3", ["-c:a", "libmp3lame", "-b:a", "32k"]), ("a.flac", ["-c:a", "flac"]),
                           ("s16.wav", ["-c:a", "pcm_s16le"]), ("opus.ogg", ["-c:a", "libopus", "-b:a", "16k"])]:
            write(out, "stream_decoder", name, header + ff(name, *args, seconds=0.1))
        sizes = wav_size_seeds()
        for name in ["two_files.wav", "rate_8hz.wav", "nan_f32.wav", "unknown_size_then_wav.wav"]:
            write(out, "stream_decoder", name, header + sizes[name])
        # A decompression bomb: 4 minutes of 8 kHz silence in ~10 KB of FLAC, which decodes
        # past the target's 30 s budget.
        path = os.path.join(tmp, "bomb.flac")
        subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
                        "anullsrc=r=8000:cl=mono", "-t", "240", "-c:a", "flac", "-frame_size", "16384", path],
                       check=True)
        write(out, "stream_decoder", "flac_bomb.flac", header + open(path, "rb").read())


def wav_file(data, rate=16000, channels=1, bits=16, tag=1, data_size=None, extra=b""):
    """A RIFF/WAVE file around `data` (`extra`: chunks between 'fmt ' and 'data')."""
    fmt = struct.pack("<HHIIHH", tag, channels, rate, rate * channels * bits // 8, channels * bits // 8, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + extra
    body += b"data" + struct.pack("<I", len(data) if data_size is None else data_size) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def wav_size_seeds():
    tone = b"".join(struct.pack("<h", int(8000 * math.sin(i * 0.3))) for i in range(64))
    odd = bytes(128 + int(60 * math.sin(i * 0.2)) for i in range(33))  # 8-bit: an odd size, so a pad byte
    list_chunk = b"LIST" + struct.pack("<I", 4) + b"INFO"
    second = wav_file(tone[:64], rate=22050, channels=2)
    return {
        # 64 bytes of 8 Hz 8-bit audio: refused on the header (upsampled it made 2000 samples a byte).
        "rate_8hz.wav": wav_file(bytes(range(64)), rate=8, bits=8),
        "rate_7999.wav": wav_file(tone, rate=7999),
        # Sizes that claim more than follows: the data chunk, and a LIST chunk of 1.4 GB before it.
        "huge_data_size.wav": wav_file(tone[:16], data_size=0xFFFFFFF0),
        "list_claims_gb.wav": wav_file(tone, extra=b"LIST" + struct.pack("<I", 0x55555555) + b"INFO"),
        # Files back to back: an odd 'data', its pad byte, a LIST of the same file, then a second file.
        "two_files.wav": wav_file(odd, rate=8000, bits=8) + b"\0" + list_chunk + second,
        # A 'data' size of "until the end": the second file is the first one's data.
        "unknown_size_then_wav.wav": wav_file(tone[:32], data_size=0xFFFFFFFF) + second,
        "nan_f32.wav": wav_file(struct.pack("<4f", 0.25, float("nan"), float("inf"), -0.5), tag=3, bits=32),
    }


def text_seeds(out):
    for i, t in enumerate(["/asr\n", "/asr?language=en&mode=diff\n\x03\x01\x02\x07\x00\x01\x02\x03\x04\x05\x06",
                           "/asr?language=auto&mode=full&token=abc%20d&target_language=fr\n",
                           "/asr?mode=x%41&language=%zz&&=&a\n\x01\x00\xff\x7f",
                           "/asr?language=de+DE&mode=\n",
                           # A NUL, a line break and an escape in values (they cut or broke error texts).
                           "/asr?mode=full%00diff%0D%0A%1B[2J&language=e%00n\n\x02\x07\xc8" + "\x10\x27" * 300]):
        write(out, "wlk_request", "seed%d" % i, t)
    for i, t in enumerate(["/v1/listen\n{\"type\":\"KeepAlive\"}",
                           "/v1/listen?encoding=linear16&sample_rate=16000&interim_results=true&utterance_end_ms=1000"
                           "\n{\"type\":\"Finalize\"}\n{\"type\":\"CloseStream\"}",
                           "/v1/listen?language=en-US&punctuate=true&smart_format=1&endpointing=false&vad_events=true"
                           "&diarize=false&channels=1&model=nova-2\n{\"type\":\"Other\"}\n[1,2]\n{\"type\":3}",
                           "/v1/listen?language=multi&endpointing=300&token=x\n{\"type\":\"KeepAlive\",\"x\":[{}]}",
                           # A NUL and line breaks in values; a long unknown type (a 1 MB one was echoed whole).
                           "/v1/listen?punctuate=tr%00ue&language=en%0D%0AX&sample_rate=9%00\n{\"type\":\"" +
                           "Keep\\u0000Alive" * 50 + "\"}\n{\"type\":\"\\u001b[2J\"}",
                           "/v1/listen?encoding=mulaw&sample_rate=8000&channels=2&multichannel=true&keyterm=earshot"
                           "&keyterm=ggml%20kernels&keywords=Parakeet:3&keywords=um:-2\n{\"type\":\"Finalize\"}"]):
        write(out, "deepgram", "seed%d" % i, t)
    realtime = [
        '{"type":"session.update","session":{"type":"transcription","audio":{"input":{"format":{"type":"audio/pcm",'
        '"rate":24000},"transcription":{"model":"gpt-4o-transcribe","language":"en","prompt":"earshot, ggml",'
        '"keywords":["Parakeet"]},"turn_detection":{"type":"server_vad","threshold":0.5,"prefix_padding_ms":300,'
        '"silence_duration_ms":500}}},"include":["item.input_audio_transcription.logprobs"]}}\n'
        '{"type":"input_audio_buffer.append","audio":"AAABAAIA","event_id":"e1"}\n{"type":"input_audio_buffer.commit"}',
        '{"type":"transcription_session.update","session":{"input_audio_format":"g711_ulaw",'
        '"input_audio_transcription":{"model":"whisper-1","language":"fr"},"turn_detection":null}}\n'
        '{"type":"input_audio_buffer.append","audio":"/38A/w=="}\n{"type":"input_audio_buffer.clear"}\n'
        '{"type":"session.update","session":{"audio":{"input":{"turn_detection":{"type":"semantic_vad",'
        '"eagerness":"low"},"format":{"type":"audio/pcma"}}}}}',
        '{"type":"response.create"}\n[1]\n{"type":"input_audio_buffer.append","audio":"A$=="}\n{"type":7}',
    ]
    for i, t in enumerate(realtime):
        write(out, "openai_realtime", "seed%d" % i, t)
    b = "----earshotBoundary7MA4YWxk"
    form = ("--{b}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n"
            "--{b}\r\nContent-Disposition: form-data; name=\"response_format\"\r\n\r\nverbose_json\r\n"
            "--{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n"
            "Content-Type: audio/wav\r\n\r\nRIFF\x00\x01WAVEfmt \r\n--{b}--\r\n").format(b=b)
    write(out, "multipart", "openai_form", "multipart/form-data; boundary=%s\n%s" % (b, form))
    write(out, "multipart", "quoted_boundary",
          "Multipart/Form-Data; charset=utf-8; boundary=\"a b\"\n--a b\r\ncontent-disposition: form-data; "
          "name=file; filename=x.mp3\r\n\r\n\r\n--a b--")
    write(out, "multipart", "unterminated", "multipart/form-data; boundary=X\n--X\r\nA: b\r\n\r\ndata")
    # Tokenizer: byte 0 bit 0 = multilingual, bit 1 = encode (else decode ids), bit 2 = a language without spaces.
    write(out, "tokenizer", "encode_en", b"\x02 Hello, world! It's 3.14 o'clock   \n\tdon't")
    write(out, "tokenizer", "encode_multi", "\x03 Grüße, 世界! Привет ɛ̃ \U0001F600 ".encode())
    write(out, "tokenizer", "decode_en", b"\x00" + struct.pack("<8i", 15496, 11, 995, 50256, 50257, 50363, 51863, -1))
    write(out, "tokenizer", "decode_ja", b"\x05" + struct.pack("<6i", 50258, 50266, 50359, 171, 109, 51865))


def main():
    make_model, shared, out = sys.argv[1:4]
    whisper_seeds(make_model, shared, out)
    vad_seeds(shared, out)
    gguf_seeds(out)
    audio_seeds(out)
    text_seeds(out)
    if len(sys.argv) > 4:
        parakeet_seeds(sys.argv[4], out)


if __name__ == "__main__":
    main()
