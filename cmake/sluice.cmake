# Helpers shared by every module. No code lives here.

# Warnings and sanitizers apply to everything we compile (not to imported targets).
add_compile_options(-Wall -Wextra -Wshadow -Wno-unused-parameter)
if(SLUICE_WERROR)
  add_compile_options(-Werror)
endif()
if(SLUICE_SANITIZE)
  add_compile_options(-fsanitize=${SLUICE_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${SLUICE_SANITIZE})
endif()
# No -march=native: one binary runs on any x86-64 (or ARM64); SIMD kernels are separate
# translation units with their own -m flags, chosen at run time (src/kernels).
# No floating-point contraction anywhere: GCC's default for C++ is -ffp-contract=fast, which is
# moot on baseline x86-64 (no FMA) but fuses a·b + c on ARM64 (FMA is baseline there) and would
# make model code round differently per architecture (docs/arm.md). Fused multiply-adds are
# written out where meant (std::fma, intrinsics).
add_compile_options(-ffp-contract=off)

# sluice_add_module(NAME SOURCES ... DEPS ...)
# A module is a static library whose link line is its dependency rule: it may use only DEPS.
function(sluice_add_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${M_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC ${M_DEPS})
endfunction()
