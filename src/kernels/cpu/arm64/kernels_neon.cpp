// The "neon" ARM64 kernel set: Armv8.0-A Advanced SIMD only (e.g. Cortex-A53, Cortex-A72).
// Compiled with this set's -march flags (src/kernels/CMakeLists.txt); the code is arm_kernels.inc.
#define SLUICE_ARM_LEVEL 0
#define SLUICE_ARM_TABLE kCpuKernelsNeon
#define SLUICE_ARM_NAME "neon"
#include "kernels/cpu/arm64/arm_kernels.inc"
