# Per-step costs of the Whisper session beyond the decoder graph itself (beam KV reorder).
earshot_micro_benchmark(earshot_bench_model SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/model_benchmark.cpp
                        DEPS earshot_whisper)
