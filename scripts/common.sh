# Sourced by the other scripts: what they must agree on.
# EARSHOT_CUDA=ON (or on, 1, true) selects the CUDA flavour: ggml with its CUDA
# backend in third_party/install-cuda, builds in build/<flavor>-cuda.
earshot_cuda_enabled() {
  case "${EARSHOT_CUDA:-OFF}" in ON | on | 1 | true) return 0 ;; *) return 1 ;; esac
}
