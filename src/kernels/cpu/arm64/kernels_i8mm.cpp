// The "i8mm" ARM64 kernel set: + SMMLA (Armv8.6-A i8mm: e.g. Neoverse V1, Neoverse N2, Cortex-A710).
// Compiled with this set's -march flags (src/kernels/CMakeLists.txt); the code is arm_kernels.inc.
#define SLUICE_ARM_LEVEL 2
#define SLUICE_ARM_TABLE kCpuKernelsI8mm
#define SLUICE_ARM_NAME "i8mm"
#include "kernels/cpu/arm64/arm_kernels.inc"
