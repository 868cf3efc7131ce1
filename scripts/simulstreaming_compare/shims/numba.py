"""Stand-in for numba (only its jit decorator is imported by whisper.timing, for
DTW code SimulStreaming does not run)."""


def jit(*args, **kwargs):
    if args and callable(args[0]):
        return args[0]
    return lambda f: f
