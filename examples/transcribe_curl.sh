#!/usr/bin/env bash
# A file to subtitles with curl, through the two upload APIs of `earshot serve`.
#   examples/transcribe_curl.sh talk.wav [http://127.0.0.1:8000] > talk.srt
# EARSHOT_API_TOKEN, when set, is sent as the key (the server's --api-token).
set -euo pipefail
file="$1"
server="${2:-http://127.0.0.1:8000}"
auth=()
[ -n "${EARSHOT_API_TOKEN:-}" ] && auth=(-H "Authorization: Bearer $EARSHOT_API_TOKEN")
# OpenAI's route: multipart upload, SRT back (json, verbose_json, text and vtt likewise).
curl -sS --fail-with-body "${auth[@]}" -F "file=@$file" -F response_format=srt "$server/v1/audio/transcriptions"
# Deepgram's prerecorded route: the body is the audio; JSON back (to stderr here).
curl -sS --fail-with-body "${auth[@]}" --data-binary "@$file" "$server/v1/listen?punctuate=true" >&2
echo >&2
