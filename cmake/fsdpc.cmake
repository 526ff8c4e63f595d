# Helpers shared by the core, the in-tree plugins and the tests.

set(FSDPC_WARNINGS -Wall -Wextra -Wno-unused-parameter -Wshadow -Wstrict-prototypes)

function(fsdpc_target_defaults tgt)
  target_compile_options(${tgt} PRIVATE $<$<COMPILE_LANGUAGE:C>:${FSDPC_WARNINGS}>)
  if(FSDPC_SANITIZE)
    # A UBSan report fails the test (by default it only prints and goes on).
    target_compile_options(${tgt} PRIVATE $<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer>)
    target_link_options(${tgt} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()

# add_subdirectory for every folder matching GLOB that has a CMakeLists.txt,
# so adding a plugin or a test folder never means editing a shared file.
function(fsdpc_add_subdirs pattern)
  file(GLOB dirs LIST_DIRECTORIES true ${CMAKE_CURRENT_SOURCE_DIR}/${pattern})
  list(SORT dirs)
  foreach(d ${dirs})
    if(IS_DIRECTORY ${d} AND EXISTS ${d}/CMakeLists.txt)
      add_subdirectory(${d})
    endif()
  endforeach()
endfunction()

# fsdpc_add_plugin(KIND NAME SOURCES... [LIBS ...] [CUDA_SOURCES ...])
# Builds libfsdpc-<kind>-<name>.so into build/plugins with hidden visibility:
# only fsdpc_plugin_entry_v1 is exported. Plugins include only plugin.h.
function(fsdpc_add_plugin kind name)
  cmake_parse_arguments(P "" "" "SOURCES;LIBS;CUDA_SOURCES" ${ARGN})
  set(tgt fsdpc-${kind}-${name})
  set(srcs ${P_SOURCES})
  if(FSDPC_HAVE_CUDA AND P_CUDA_SOURCES)
    list(APPEND srcs ${P_CUDA_SOURCES})
  endif()
  add_library(${tgt} MODULE ${srcs})
  set_target_properties(${tgt} PROPERTIES
    PREFIX "lib" OUTPUT_NAME "fsdpc-${kind}-${name}"
    LIBRARY_OUTPUT_DIRECTORY ${FSDPC_PLUGIN_BUILD_DIR}
    C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_include_directories(${tgt} PRIVATE ${PROJECT_SOURCE_DIR}/core/include)
  if(FSDPC_HAVE_CUDA AND P_CUDA_SOURCES)
    target_compile_definitions(${tgt} PRIVATE FSDPC_WITH_CUDA=1)
    target_link_libraries(${tgt} PRIVATE CUDA::cudart)
  endif()
  target_link_libraries(${tgt} PRIVATE ${P_LIBS})
  # -z nodelete: a plugin (and the libgomp it may pull in, whose idle
  # threads outlive any call) stays mapped even after dlclose.
  target_link_options(${tgt} PRIVATE -Wl,--no-undefined -Wl,-z,nodelete)
  fsdpc_target_defaults(${tgt})
  install(TARGETS ${tgt} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/fsdpc/plugins)
  set_property(GLOBAL APPEND PROPERTY FSDPC_PLUGIN_TARGETS ${tgt})
endfunction()

# CUDA: AUTO enables it when a CUDA compiler is found. Kernels target Hopper.
macro(fsdpc_setup_cuda)
  set(FSDPC_HAVE_CUDA OFF)
  if(NOT FSDPC_CUDA STREQUAL "OFF")
    if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
      set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
    endif()
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_ARCHITECTURES 90a)
      set(CMAKE_CUDA_STANDARD 17)
      enable_language(CUDA)
      find_package(CUDAToolkit REQUIRED)
      set(FSDPC_HAVE_CUDA ON)
    elseif(FSDPC_CUDA STREQUAL "ON")
      message(FATAL_ERROR "FSDPC_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER)")
    endif()
  endif()
  message(STATUS "fsdpc: CUDA path ${FSDPC_HAVE_CUDA}")
endmacro()
