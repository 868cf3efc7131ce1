# Per-step cost of the AlignAtt policy's own work (alignment attention, beam selection, loop guard).
earshot_micro_benchmark(earshot_bench_policy SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/policy_benchmark.cpp
                        DEPS earshot_policy)
