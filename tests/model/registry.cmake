# Tests of downloads (the catalogue's: tests/engine/catalogue_test.cpp) (included from tests/model/CMakeLists.txt).
earshot_test(earshot_model_download_test SOURCES download_test.cpp download_llm_test.cpp DEPS earshot_model_registry earshot_engine earshot_translation_options)
