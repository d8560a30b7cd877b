# LibTorch from PyPI's `torch` wheel instead of Debian's libtorch-dev (scripts/setup --pypi-torch).
# CL_TORCH_PYTHON names a Python whose `import torch` is that wheel (the project's venv, or the
# GPU machines' own Python). The wheel is a complete LibTorch (headers, CMake config, libraries on
# MKL, with CUDA) plus the NVIDIA runtime as separate `nvidia-*` wheels. What it needs, as
# verified with torch 2.15 and nvcc 13 (docs/performance.md, "Which LibTorch"):
# - its torch and torch/share/cmake first on CMAKE_PREFIX_PATH, so Debian's /usr/lib libtorch is
#   never mixed in (that crashes at start-up on a DispatchKeySet assertion);
# - -Wl,-rpath-link to every nvidia/*/lib, else the CUDA toolkit's own NCCL is picked and linking
#   fails on missing symbols;
# - a TORCH_CUDA_ARCH_LIST without compute_50 (nvcc 13 refuses it), and CUDA 17 (set at the top).
set(CL_TORCH_PYTHON "" CACHE FILEPATH "Python whose torch (PyPI wheel) provides LibTorch; empty: Debian's libtorch")

if(CL_TORCH_PYTHON)
  execute_process(
    COMMAND ${CL_TORCH_PYTHON} -c
            "import os, torch; print(torch.utils.cmake_prefix_path); print(os.path.dirname(os.path.dirname(torch.__file__)))"
    OUTPUT_VARIABLE _cl_torch_out RESULT_VARIABLE _cl_torch_rc ERROR_VARIABLE _cl_torch_err
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _cl_torch_rc EQUAL 0)
    message(FATAL_ERROR "CL_TORCH_PYTHON=${CL_TORCH_PYTHON}: `import torch` failed:\n${_cl_torch_err}")
  endif()
  string(REPLACE "\n" ";" _cl_torch_out "${_cl_torch_out}")
  list(GET _cl_torch_out 0 _cl_torch_cmake)
  list(GET _cl_torch_out 1 _cl_site_packages)
  list(PREPEND CMAKE_PREFIX_PATH "${_cl_site_packages}/torch" "${_cl_torch_cmake}")
  set(Torch_DIR "${_cl_torch_cmake}/Torch" CACHE PATH "LibTorch's CMake config (PyPI wheel)" FORCE)
  file(GLOB _cl_nvidia_libs LIST_DIRECTORIES true "${_cl_site_packages}/nvidia/*/lib")
  foreach(dir IN LISTS _cl_nvidia_libs)
    add_link_options("LINKER:-rpath-link,${dir}")
  endforeach()
  # Some wheels' libtorch.so exports copies of libstdc++'s std::filesystem functions (torch 2.11's
  # 64 of them, 2.15's none); found before libstdc++ (a link with only libstdc++.a, as on the GPU
  # machines, even binds them at link time), they took our calls and crashed (remove_all of a
  # folder jumped to a null address in the trainer's checkpointing). libstdc++.so.6 as
  # every binary's first dependency puts its own definitions first.
  add_link_options("LINKER:--push-state,--no-as-needed" "-l:libstdc++.so.6" "LINKER:--pop-state")
  if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(ENV{TORCH_CUDA_ARCH_LIST} "8.0;8.6;8.9;9.0")
  endif()
  message(STATUS "  LibTorch from    ${CL_TORCH_PYTHON} (${_cl_site_packages})")
endif()

# The wheel's include directory also carries its own {fmt} (v12), which would shadow Debian's
# (spdlog is built against fmt 9) in every file that sees both LibTorch and spdlog. LibTorch's
# targets get a copy of that directory made of links to everything but fmt/.
function(cl_hide_pypi_torch_fmt)
  if(NOT CL_TORCH_PYTHON)
    return()
  endif()
  set(real "${TORCH_INSTALL_PREFIX}/include")
  set(shadow "${CMAKE_BINARY_DIR}/torch-include")
  file(MAKE_DIRECTORY "${shadow}")
  file(GLOB entries RELATIVE "${real}" "${real}/*")
  foreach(entry IN LISTS entries)
    if(NOT entry STREQUAL "fmt" AND NOT EXISTS "${shadow}/${entry}")
      file(CREATE_LINK "${real}/${entry}" "${shadow}/${entry}" SYMBOLIC)
    endif()
  endforeach()
  string(REPLACE "${real}" "${shadow}" dirs "${TORCH_INCLUDE_DIRS}")
  set(TORCH_INCLUDE_DIRS "${dirs}" PARENT_SCOPE)
  foreach(target IN ITEMS torch torch_cpu torch_cuda torch_library c10 c10_cuda caffe2::mkl)
    if(TARGET ${target})
      get_target_property(inc ${target} INTERFACE_INCLUDE_DIRECTORIES)
      if(inc)
        string(REPLACE "${real}" "${shadow}" inc "${inc}")
        set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${inc}")
      endif()
    endif()
  endforeach()
endfunction()
