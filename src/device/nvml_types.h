/* src/device/nvml_types.h: the few NVML types and constants we use, declared ourselves so the
 * project builds without NVIDIA headers (values from NVML's public header; see shared/NVML.md).
 * Shared by the nvml backend and the fake libnvidia-ml.so.1 used in tests. */
#ifndef ZEUS_NVML_TYPES_H
#define ZEUS_NVML_TYPES_H

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef int nvmlEnableState_t;
typedef int nvmlClockType_t;
typedef int nvmlClockId_t;

#define NVML_FEATURE_DISABLED 0
#define NVML_FEATURE_ENABLED 1
#define NVML_CLOCK_GRAPHICS 0
#define NVML_CLOCK_SM 1
#define NVML_CLOCK_MEM 2
#define NVML_TEMPERATURE_GPU 0
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96

/* nvmlDeviceGetFieldValues: the power fields and their scopes (NVML_POWER_SCOPE_*). */
#define NVML_FI_DEV_POWER_AVERAGE 185
#define NVML_FI_DEV_POWER_INSTANT 186
#define NVML_POWER_SCOPE_GPU 0
#define NVML_POWER_SCOPE_MODULE 1
#define NVML_POWER_SCOPE_MEMORY 2
#define NVML_VALUE_TYPE_DOUBLE 0
#define NVML_VALUE_TYPE_UNSIGNED_INT 1
#define NVML_VALUE_TYPE_UNSIGNED_LONG 2
#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG 3
#define NVML_VALUE_TYPE_SIGNED_LONG_LONG 4
#define NVML_VALUE_TYPE_SIGNED_INT 5

typedef union nvmlValue_st {
  double dVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  int siVal;
  unsigned short usVal;
} nvmlValue_t;

/* Layout as in NVML's header (40 bytes on LP64): the caller sets fieldId and scopeId; the
 * library fills the rest, with a return code per field. */
typedef struct nvmlFieldValue_st {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  int nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

/* nvmlDeviceGetPciInfo_v3 (the same layout as _v2). */
typedef struct nvmlPciInfo_st {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

/* X(name, value) for every nvmlReturn_t code we know. */
#define ZEUS_NVML_RETURN_MAP(X)   \
  X(SUCCESS, 0)                   \
  X(ERROR_UNINITIALIZED, 1)       \
  X(ERROR_INVALID_ARGUMENT, 2)    \
  X(ERROR_NOT_SUPPORTED, 3)       \
  X(ERROR_NO_PERMISSION, 4)       \
  X(ERROR_ALREADY_INITIALIZED, 5) \
  X(ERROR_NOT_FOUND, 6)           \
  X(ERROR_INSUFFICIENT_SIZE, 7)   \
  X(ERROR_INSUFFICIENT_POWER, 8)  \
  X(ERROR_DRIVER_NOT_LOADED, 9)   \
  X(ERROR_TIMEOUT, 10)            \
  X(ERROR_IRQ_ISSUE, 11)          \
  X(ERROR_LIBRARY_NOT_FOUND, 12)  \
  X(ERROR_FUNCTION_NOT_FOUND, 13) \
  X(ERROR_CORRUPTED_INFOROM, 14)  \
  X(ERROR_GPU_IS_LOST, 15)        \
  X(ERROR_RESET_REQUIRED, 16)     \
  X(ERROR_OPERATING_SYSTEM, 17)   \
  X(ERROR_LIB_RM_VERSION_MISMATCH, 18) \
  X(ERROR_IN_USE, 19)             \
  X(ERROR_MEMORY, 20)             \
  X(ERROR_NO_DATA, 21)            \
  X(ERROR_VGPU_ECC_NOT_SUPPORTED, 22) \
  X(ERROR_INSUFFICIENT_RESOURCES, 23) \
  X(ERROR_FREQ_NOT_SUPPORTED, 24) \
  X(ERROR_ARGUMENT_VERSION_MISMATCH, 25) \
  X(ERROR_DEPRECATED, 26)         \
  X(ERROR_NOT_READY, 27)          \
  X(ERROR_GPU_NOT_FOUND, 28)      \
  X(ERROR_INVALID_STATE, 29)      \
  X(ERROR_RESET_TYPE_NOT_SUPPORTED, 30) \
  X(ERROR_UNKNOWN, 999)

enum {
#define ZEUS__NVML_ENUM(name, value) NVML_##name = (value),
  ZEUS_NVML_RETURN_MAP(ZEUS__NVML_ENUM)
#undef ZEUS__NVML_ENUM
};

#endif
