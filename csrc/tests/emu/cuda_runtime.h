// Stand-in for <cuda_runtime.h> in the CPU emulation of the kernels (emulate_kernels.cpp).
#pragma once
