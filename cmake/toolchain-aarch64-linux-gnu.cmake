# Cross build for 64-bit ARM Linux with Debian's g++-aarch64-linux-gnu, against the arm64
# multiarch libraries (dpkg --add-architecture arm64; libgtest-dev:arm64 ...; make deps-arm64).
# Test binaries run under qemu-aarch64-static (ctest uses CMAKE_CROSSCOMPILING_EMULATOR); the
# CPU model qemu emulates is SLUICE_QEMU_CPU (max: every feature, i8mm and SVE included).
# A native build on an ARM64 host needs no toolchain file.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# Libraries and their CMake/pkg-config files come from the arm64 multiarch folders only;
# header-only packages (nlohmann-json, CLI11) are architecture-independent in /usr.
set(CMAKE_FIND_ROOT_PATH /usr/lib/aarch64-linux-gnu /usr)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)

set(SLUICE_QEMU_CPU max CACHE STRING "CPU model qemu-aarch64-static emulates for ctest")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static -cpu ${SLUICE_QEMU_CPU})
