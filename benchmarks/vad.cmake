# Silero VAD throughput: windows per second and real-time factor, single thread.
earshot_micro_benchmark(earshot_bench_vad
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/vad_benchmark.cpp
  DEPS earshot_vad)
