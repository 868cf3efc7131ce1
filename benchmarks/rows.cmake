# A decoder step's largest product (the logits) on the few-row op and ggml's, by thread count.
earshot_micro_benchmark(earshot_bench_rows SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/rows_benchmark.cpp
                        DEPS earshot_model_runtime ggml::ggml)
