// Emulation build (native/cuda/emu): the data-type codes of library_types.h that the addon uses.
#pragma once
typedef enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
