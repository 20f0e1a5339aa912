# Ember's changes to llama-cpp-python's build of llama.cpp, injected without patching its source:
# pyproject.toml names this module in CMAKE_PROJECT_INCLUDE (CMake >= 3.29 finds a module by name on
# CMAKE_MODULE_PATH), and uv installs this folder's package into llama-cpp-python's build
# environment, where scikit-build-core puts its folder on CMAKE_MODULE_PATH (the package's
# `cmake.module` entry point). CMake includes it at the end of every project() call.
#
# 1. Only the CPU variants named in EMBER_CPU_VARIANTS are built. GGML_CPU_ALL_VARIANTS adds a
#    fixed list (14 on x86-64), each variant a full compile of the CPU backend; llama.cpp has no
#    option to choose. ggml/src/CMakeLists.txt defines ggml_add_cpu_backend_variant and then calls
#    it once per variant under `if (GGML_CPU_ALL_VARIANTS)`: the first read of that variable there,
#    after the function exists, replaces the function with one that passes only the named variants
#    on to the original (CMake keeps an overridden command as `_NAME`). x86-64 only: other CPUs
#    keep llama.cpp's list.
# 2. llama-common is not built: Ember and llama-cpp-python never load it (libmtmd must not link
#    it, upstream checks that), yet llama-cpp-python forces LLAMA_BUILD_COMMON on, a fifth of the
#    compile. A normal variable in llama.cpp's directory shadows that cache entry.
#
# EMBER_LLAMA_CMAKE (set in pyproject.toml) must equal the version below: change both with this
# file, so that the config settings, uv's cache key for the built wheel, change too.

set(_EMBER_LLAMA_CMAKE_VERSION 1)

if(NOT COMMAND _ember_cpu_variants_watch)
  if(NOT EMBER_LLAMA_CMAKE STREQUAL _EMBER_LLAMA_CMAKE_VERSION)
    message(FATAL_ERROR "EmberLlamaBuild.cmake is version ${_EMBER_LLAMA_CMAKE_VERSION} but "
      "pyproject.toml sets EMBER_LLAMA_CMAKE=${EMBER_LLAMA_CMAKE}: change both together")
  endif()

  # variable_watch's callback: ARGV are the variable, the access, its value and the list file.
  function(_ember_cpu_variants_watch variable access value list_file)
    get_property(wrapped GLOBAL PROPERTY EMBER_CPU_VARIANTS_WRAPPED)
    if(wrapped OR NOT access STREQUAL "READ_ACCESS" OR NOT GGML_SYSTEM_ARCH STREQUAL "x86"
       OR NOT list_file MATCHES "/ggml/src/CMakeLists.txt$" OR NOT COMMAND ggml_add_cpu_backend_variant)
      return()
    endif()
    set_property(GLOBAL PROPERTY EMBER_CPU_VARIANTS_WRAPPED TRUE)
    function(ggml_add_cpu_backend_variant tag_name)
      set_property(GLOBAL APPEND PROPERTY EMBER_CPU_VARIANTS_OFFERED ${tag_name})
      if(tag_name IN_LIST EMBER_CPU_VARIANTS)
        _ggml_add_cpu_backend_variant(${tag_name} ${ARGN})
      else()
        message(STATUS "Ember: CPU variant ${tag_name} not built (EMBER_CPU_VARIANTS)")
      endif()
    endfunction()
  endfunction()

  # At the end of the whole configure: say when the list did not apply, rather than build all 14
  # (or none) unnoticed; tests/test_cpu_variant_build.py checks the installed files as well.
  function(_ember_cpu_variants_check)
    if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|i686|AMD64|amd64)$") # ggml's test for x86
      return()
    endif()
    get_property(wrapped GLOBAL PROPERTY EMBER_CPU_VARIANTS_WRAPPED)
    get_property(offered GLOBAL PROPERTY EMBER_CPU_VARIANTS_OFFERED)
    if(NOT wrapped)
      message(WARNING "Ember: EMBER_CPU_VARIANTS did not apply (this llama.cpp adds its CPU "
        "variants another way): every variant is built")
      return()
    endif()
    foreach(name IN LISTS EMBER_CPU_VARIANTS)
      if(NOT name IN_LIST offered)
        message(WARNING "Ember: EMBER_CPU_VARIANTS names ${name}, which llama.cpp does not offer "
          "here (it offers: ${offered})")
      endif()
    endforeach()
  endfunction()

  if(DEFINED EMBER_CPU_VARIANTS AND GGML_CPU_ALL_VARIANTS)
    message(STATUS "Ember: CPU variants built: ${EMBER_CPU_VARIANTS}")
    variable_watch(GGML_CPU_ALL_VARIANTS _ember_cpu_variants_watch)
    cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _ember_cpu_variants_check)
  endif()
endif()

if(PROJECT_NAME STREQUAL "llama.cpp" AND DEFINED EMBER_LLAMA_COMMON AND NOT EMBER_LLAMA_COMMON)
  message(STATUS "Ember: llama-common not built (EMBER_LLAMA_COMMON)")
  set(LLAMA_BUILD_COMMON OFF)
endif()
