// The "dotprod" ARM64 kernel set: + SDOT (Armv8.2-A dotprod: e.g. Cortex-A55, Cortex-A76, Neoverse N1).
// Compiled with this set's -march flags (src/kernels/CMakeLists.txt); the code is arm_kernels.inc.
#define SLUICE_ARM_LEVEL 1
#define SLUICE_ARM_TABLE kCpuKernelsDotprod
#define SLUICE_ARM_NAME "dotprod"
#include "kernels/cpu/arm64/arm_kernels.inc"
