# Translation LLM on libllama at Hy-MT2-1.8B's dimensions (random weights, written
# to a temporary folder at start, then quantised): draft latency and tokens/s.
earshot_micro_benchmark(earshot_bench_llm SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/llm_benchmark.cpp
                        DEPS earshot_llm_llama earshot_llm_random llama)
target_compile_definitions(earshot_bench_llm PRIVATE EARSHOT_LLAMA_MODELS_DIR="${EARSHOT_LLAMA_SOURCE_DIR}/models")
