earshot_micro_benchmark(earshot_bench_features SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/features_benchmark.cpp
                        DEPS earshot_features)
