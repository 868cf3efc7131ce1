# Translation LLM on libllama at Hy-MT2-1.8B's dimensions (random weights, written
# to a temporary folder at start, then quantised): draft latency and tokens/s.
earshot_micro_benchmark(earshot_bench_llm SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/llm_benchmark.cpp
                        DEPS earshot_llm_llama earshot_llm_random earshot_tool_machine llama)
target_compile_definitions(earshot_bench_llm PRIVATE EARSHOT_LLAMA_MODELS_DIR="${EARSHOT_LLAMA_SOURCE_DIR}/models")

# Sessions' translation one machine sustains at those dimensions (a program of its
# own: a search over N, not a timed loop).
add_executable(earshot_bench_tcap ${CMAKE_CURRENT_SOURCE_DIR}/translation_capacity_benchmark.cpp)
target_link_libraries(earshot_bench_tcap PRIVATE earshot_compile_options earshot_bench_translation_capacity
                      earshot_llm_llama earshot_llm_random earshot_common llama)
target_compile_definitions(earshot_bench_tcap PRIVATE
                           EARSHOT_LLAMA_MODELS_DIR="${EARSHOT_LLAMA_SOURCE_DIR}/models")
