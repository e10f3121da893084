# How zoo finds its external dependencies. Nothing is vendored: every package
# comes from the system (Debian 12 names in third_party/README.md) or, for
# LibTorch 2.x + CUDA, from CMAKE_PREFIX_PATH. Each is wrapped in a small
# INTERFACE target (zoo_torch, zoo_yaml, zoo_cxxopts, zoo_hdf5) so the rest of
# the build does not care how it was found.

# --- LibTorch (>= 1.13). Debian: libtorch-dev. Official 2.x + CUDA: put its
# share/cmake on CMAKE_PREFIX_PATH (see third_party/README.md).
find_package(Torch 1.13 REQUIRED)
add_library(zoo_torch INTERFACE)
option(ZOO_STDCXX_BEFORE_TORCH "Link libstdc++ ahead of LibTorch >= 2.5 (pytorch#133437)" ON)
if(ZOO_STDCXX_BEFORE_TORCH AND Torch_VERSION VERSION_GREATER_EQUAL 2.5)
  # PyTorch 2.5+ wheels export std::filesystem symbols from a statically linked,
  # older libstdc++ (pytorch/pytorch#133437); when they win symbol lookup,
  # std::filesystem::remove_all crashes. Naming libstdc++ before LibTorch puts
  # it first in the executable's lookup order.
  target_link_libraries(zoo_torch INTERFACE "-Wl,--push-state,--no-as-needed" stdc++ "-Wl,--pop-state")
endif()
target_link_libraries(zoo_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(zoo_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
# TORCH_CXX_FLAGS carries -D_GLIBCXX_USE_CXX11_ABI=0|1; every zoo target must agree.
separate_arguments(_zoo_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
add_compile_options(${_zoo_torch_flags})
message(STATUS "zoo: LibTorch ${Torch_VERSION} (${TORCH_LIBRARIES})")

# at::parallel_for forks its threads in an inline `#pragma omp parallel`
# (ATen/ParallelOpenMP.h): in a file built without OpenMP it runs the whole
# range on the calling thread. zoo's CPU kernels (Adam, norms, attention, the
# loss, initializers, checkpoint checksums) rely on it, so every C++ file gets
# OpenMP, linked to the runtime LibTorch itself uses: the libgomp PyTorch's
# wheels carry in their lib/, else the compiler's (Debian's LibTorch links that).
find_package(OpenMP REQUIRED COMPONENTS CXX)
separate_arguments(_zoo_openmp_flags UNIX_COMMAND "${OpenMP_CXX_FLAGS}")
target_compile_options(zoo_torch INTERFACE "$<$<COMPILE_LANGUAGE:CXX>:${_zoo_openmp_flags}>")
file(GLOB _zoo_torch_gomp "${TORCH_INSTALL_PREFIX}/lib/libgomp*.so*")
if(_zoo_torch_gomp)
  list(GET _zoo_torch_gomp 0 _zoo_openmp_runtime)
else()
  set(_zoo_openmp_runtime ${OpenMP_CXX_LIBRARIES})
endif()
target_link_libraries(zoo_torch INTERFACE ${_zoo_openmp_runtime})
message(STATUS "zoo: OpenMP ${OpenMP_CXX_VERSION} (${_zoo_openmp_flags}, runtime ${_zoo_openmp_runtime})")

# --- Gloo headers, which c10d's ProcessGroupGloo.hpp includes (the library
# itself is inside LibTorch). Debian: libgloo-dev. Without them zoo builds
# without data-parallel training and says so when it is asked for.
find_path(ZOO_GLOO_INCLUDE_DIR gloo/algorithm.h HINTS ${TORCH_INCLUDE_DIRS})
if(ZOO_GLOO_INCLUDE_DIR)
  target_compile_definitions(zoo_torch INTERFACE ZOO_HAVE_GLOO=1)
  message(STATUS "zoo: Gloo headers in ${ZOO_GLOO_INCLUDE_DIR}: data-parallel training on")
else()
  message(WARNING "zoo: no gloo/algorithm.h (Debian: libgloo-dev): building without data-parallel training")
endif()

# --- NCCL, c10d's GPU process group, in CUDA builds of LibTorch. Its header
# compiles only under USE_C10D_NCCL (LibTorch's own build sets it) and needs
# nccl.h: in PyTorch's wheels it sits in site-packages/nvidia/nccl/include.
option(ZOO_WITH_NCCL "Use c10d's NCCL process group where LibTorch has one" ON)
if(ZOO_WITH_NCCL AND C10_CUDA_LIBRARY)
  find_file(ZOO_NCCL_PROCESS_GROUP torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp HINTS ${TORCH_INCLUDE_DIRS} NO_DEFAULT_PATH)
  find_path(ZOO_NCCL_INCLUDE_DIR nccl.h
            HINTS ${TORCH_INCLUDE_DIRS} "${Torch_DIR}/../../../../nvidia/nccl/include" /usr/local/cuda/include)
  if(ZOO_NCCL_PROCESS_GROUP AND ZOO_NCCL_INCLUDE_DIR)
    target_compile_definitions(zoo_torch INTERFACE ZOO_HAVE_NCCL=1 USE_C10D_NCCL)
    target_include_directories(zoo_torch SYSTEM INTERFACE ${ZOO_NCCL_INCLUDE_DIR})
    message(STATUS "zoo: NCCL (nccl.h in ${ZOO_NCCL_INCLUDE_DIR}): data-parallel training on GPUs")
  else()
    message(WARNING "zoo: CUDA LibTorch without ProcessGroupNCCL.hpp or nccl.h: no NCCL backend")
  endif()
endif()

# --- yaml-cpp (>= 0.7). Debian: libyaml-cpp-dev.
find_package(yaml-cpp 0.7 REQUIRED)
add_library(zoo_yaml INTERFACE)
if(TARGET yaml-cpp::yaml-cpp)
  target_link_libraries(zoo_yaml INTERFACE yaml-cpp::yaml-cpp)
else()
  target_link_libraries(zoo_yaml INTERFACE yaml-cpp)
endif()

# --- cxxopts (>= 2.2, header-only). Debian: libcxxopts-dev.
find_package(cxxopts REQUIRED)
add_library(zoo_cxxopts INTERFACE)
target_link_libraries(zoo_cxxopts INTERFACE cxxopts::cxxopts)

# --- spdlog (>= 1.10). Debian: libspdlog-dev. Linked only by zoo_log.
find_package(spdlog 1.10 REQUIRED)

# --- HDF5 C library (>= 1.10). Debian: libhdf5-dev.
find_package(HDF5 1.10 REQUIRED COMPONENTS C)
add_library(zoo_hdf5 INTERFACE)
target_include_directories(zoo_hdf5 SYSTEM INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
target_link_libraries(zoo_hdf5 INTERFACE ${HDF5_C_LIBRARIES} ${HDF5_LIBRARIES})

# --- protobuf (>= 3.12) + protoc, for TensorBoard's Event messages.
# Debian: libprotobuf-dev, protobuf-compiler.
find_package(Protobuf 3.12 REQUIRED)
add_library(zoo_protobuf INTERFACE)
target_include_directories(zoo_protobuf SYSTEM INTERFACE ${Protobuf_INCLUDE_DIRS})
target_link_libraries(zoo_protobuf INTERFACE ${Protobuf_LIBRARIES})

# --- ISA-L (>= 2.25), for CRC32C in TensorBoard's record framing. Debian: libisal-dev.
find_path(ZOO_ISAL_INCLUDE isa-l/crc.h REQUIRED)
find_library(ZOO_ISAL_LIBRARY isal REQUIRED)
add_library(zoo_isal INTERFACE)
target_include_directories(zoo_isal SYSTEM INTERFACE ${ZOO_ISAL_INCLUDE})
target_link_libraries(zoo_isal INTERFACE ${ZOO_ISAL_LIBRARY})

# --- nlohmann-json (>= 3.10, header-only), for safetensors headers and HF config.json.
# Debian: nlohmann-json3-dev.
find_package(nlohmann_json 3.10 REQUIRED)
add_library(zoo_json INTERFACE)
target_link_libraries(zoo_json INTERFACE nlohmann_json::nlohmann_json)

# --- PCRE2 (>= 10.34, 8-bit; for PCRE2_MATCH_INVALID_UTF), the tokenizers'
# SentencePiece models (tokenizer.model, spiece.model). Debian: libsentencepiece-dev.
find_path(ZOO_SENTENCEPIECE_INCLUDE sentencepiece_processor.h REQUIRED)
find_library(ZOO_SENTENCEPIECE_LIBRARY sentencepiece REQUIRED)
add_library(zoo_sentencepiece INTERFACE)
target_include_directories(zoo_sentencepiece SYSTEM INTERFACE ${ZOO_SENTENCEPIECE_INCLUDE})
target_link_libraries(zoo_sentencepiece INTERFACE ${ZOO_SENTENCEPIECE_LIBRARY})

# Unicode normalization and character classes for tokenizers. Debian: libutf8proc-dev.
find_path(ZOO_UTF8PROC_INCLUDE utf8proc.h REQUIRED)
find_library(ZOO_UTF8PROC_LIBRARY utf8proc REQUIRED)
add_library(zoo_utf8proc INTERFACE)
target_include_directories(zoo_utf8proc SYSTEM INTERFACE ${ZOO_UTF8PROC_INCLUDE})
target_link_libraries(zoo_utf8proc INTERFACE ${ZOO_UTF8PROC_LIBRARY})

# Unicode-aware pre-tokenization regex. Debian: libpcre2-dev.
find_path(ZOO_PCRE2_INCLUDE pcre2.h REQUIRED)
find_library(ZOO_PCRE2_LIBRARY pcre2-8 REQUIRED)
add_library(zoo_pcre2 INTERFACE)
target_include_directories(zoo_pcre2 SYSTEM INTERFACE ${ZOO_PCRE2_INCLUDE})
target_link_libraries(zoo_pcre2 INTERFACE ${ZOO_PCRE2_LIBRARY})

# --- zlib, for gzipped MNIST IDX files. Debian: zlib1g-dev.
find_package(ZLIB REQUIRED)
find_package(JPEG REQUIRED)  # libjpeg(-turbo): JPEG images
find_package(PNG REQUIRED)  # libpng: PNG images (Cityscapes, image folders)

# --- minja (vendored, header-only, MIT: third_party/minja/LICENSE): the Jinja
# subset Hugging Face chat templates use. No Debian package has one.
add_library(zoo_minja INTERFACE)
target_include_directories(zoo_minja SYSTEM INTERFACE ${CMAKE_CURRENT_LIST_DIR}/minja)
target_link_libraries(zoo_minja INTERFACE zoo_json)

# --- cpp-httplib (>= 0.11), the HTTP server of `zoo serve`. Debian: libcpp-httplib-dev
# (a compiled library; its pkg-config file carries the OpenSSL/zlib/brotli
# defines it was built with). Where it is missing zoo builds without `zoo serve`.
find_package(PkgConfig)
if(PkgConfig_FOUND)
  pkg_check_modules(ZOO_HTTPLIB IMPORTED_TARGET cpp-httplib>=0.11)
endif()
