# Tests of the model registry and downloads (included from tests/model/CMakeLists.txt).
earshot_test(earshot_model_registry_test SOURCES registry_test.cpp DEPS earshot_model_registry)
earshot_test(earshot_model_download_test SOURCES download_test.cpp download_llm_test.cpp DEPS earshot_model_registry)
