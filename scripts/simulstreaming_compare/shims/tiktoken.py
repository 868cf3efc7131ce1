"""A minimal stand-in for the tiktoken package (not in Debian), enough for
openai-whisper's tokenizer in SimulStreaming: byte-level BPE by merge rank over
the same regex split, special tokens by name. Written for this comparison."""
import regex


class Encoding:
    def __init__(self, name, explicit_n_vocab, pat_str, mergeable_ranks, special_tokens):
        self.name = name
        self.n_vocab = explicit_n_vocab
        self._pat = regex.compile(pat_str)
        self._ranks = mergeable_ranks
        self._decoder = {v: k for k, v in mergeable_ranks.items()}
        self._special = special_tokens
        self._special_decoder = {v: k.encode() for k, v in special_tokens.items()}
        self.special_tokens_set = set(special_tokens)
        self.eot_token = special_tokens.get("<|endoftext|>")

    def _bpe(self, piece):
        parts = [bytes([b]) for b in piece]
        while len(parts) > 1:
            best = None
            for i in range(len(parts) - 1):
                r = self._ranks.get(parts[i] + parts[i + 1])
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            parts = parts[:i] + [parts[i] + parts[i + 1]] + parts[i + 2:]
        return [self._ranks[p] for p in parts]

    def encode(self, text, allowed_special=(), disallowed_special=()):
        out = []
        for piece in self._pat.findall(text):
            out.extend(self._bpe(piece.encode()))
        return out

    def encode_single_token(self, text):
        if text in self._special:
            return self._special[text]
        return self._ranks[text.encode() if isinstance(text, str) else text]

    def decode_single_token_bytes(self, token):
        return self._decoder.get(token) or self._special_decoder[token]

    def decode_bytes(self, tokens):
        return b"".join(self.decode_single_token_bytes(t) for t in tokens)

    def decode(self, tokens, errors="replace"):
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)
