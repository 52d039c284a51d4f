/* src/device/amdsmi_types.h: the few amdsmi types, constants and functions we use, declared
 * ourselves so the project builds without ROCm installed. Shared by the amdsmi backend and the
 * fake libamd_smi.so used in tests.
 *
 * Followed: ROCm/amdsmi include/amd_smi/amdsmi.h at commit 0ceca28f4139dced5e9b5739a3f393780d7add48
 * (2024-10-23, library version 24.7.0.0, the ROCm 6.2/6.3 line). Values and layouts below match
 * that header's ABI: enum values are given explicitly, structs keep every field and their reserved
 * tails so that sizes agree. Later releases (amdsmi 25.x, ROCm 6.4+) changed some structs
 * (amdsmi_power_info_t among them); docs/amd.md says what was and was not checked. The sizes and
 * offsets of the structs below, the enum values and the BDF bit layout were compared with that
 * header compiled side by side (x86-64, GCC): they agree.
 */
#ifndef ZEUS_AMDSMI_TYPES_H
#define ZEUS_AMDSMI_TYPES_H

#include <stdint.h>

/* amdsmi_status_t is an enum whose largest values are 0xFFFFFFFE/F: 32 bits, unsigned. */
typedef uint32_t amdsmi_status_t;
typedef void *amdsmi_processor_handle;
typedef void *amdsmi_socket_handle;
typedef int amdsmi_clk_type_t;
typedef int amdsmi_temperature_type_t;
typedef int amdsmi_temperature_metric_t;
typedef int amdsmi_dev_perf_level_t;

/* The status codes: X(name, value), as in amdsmi.h. */
#define ZEUS_AMDSMI_STATUS_MAP(X)                    \
  X(AMDSMI_STATUS_SUCCESS, 0)                        \
  X(AMDSMI_STATUS_INVAL, 1)                          \
  X(AMDSMI_STATUS_NOT_SUPPORTED, 2)                  \
  X(AMDSMI_STATUS_NOT_YET_IMPLEMENTED, 3)            \
  X(AMDSMI_STATUS_FAIL_LOAD_MODULE, 4)               \
  X(AMDSMI_STATUS_FAIL_LOAD_SYMBOL, 5)               \
  X(AMDSMI_STATUS_DRM_ERROR, 6)                      \
  X(AMDSMI_STATUS_API_FAILED, 7)                     \
  X(AMDSMI_STATUS_TIMEOUT, 8)                        \
  X(AMDSMI_STATUS_RETRY, 9)                          \
  X(AMDSMI_STATUS_NO_PERM, 10)                       \
  X(AMDSMI_STATUS_INTERRUPT, 11)                     \
  X(AMDSMI_STATUS_IO, 12)                            \
  X(AMDSMI_STATUS_ADDRESS_FAULT, 13)                 \
  X(AMDSMI_STATUS_FILE_ERROR, 14)                    \
  X(AMDSMI_STATUS_OUT_OF_RESOURCES, 15)              \
  X(AMDSMI_STATUS_INTERNAL_EXCEPTION, 16)            \
  X(AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS, 17)           \
  X(AMDSMI_STATUS_INIT_ERROR, 18)                    \
  X(AMDSMI_STATUS_REFCOUNT_OVERFLOW, 19)             \
  X(AMDSMI_STATUS_BUSY, 30)                          \
  X(AMDSMI_STATUS_NOT_FOUND, 31)                     \
  X(AMDSMI_STATUS_NOT_INIT, 32)                      \
  X(AMDSMI_STATUS_NO_SLOT, 33)                       \
  X(AMDSMI_STATUS_DRIVER_NOT_LOADED, 34)             \
  X(AMDSMI_STATUS_NO_DATA, 40)                       \
  X(AMDSMI_STATUS_INSUFFICIENT_SIZE, 41)             \
  X(AMDSMI_STATUS_UNEXPECTED_SIZE, 42)               \
  X(AMDSMI_STATUS_UNEXPECTED_DATA, 43)               \
  X(AMDSMI_STATUS_NON_AMD_CPU, 44)                   \
  X(AMDSMI_STATUS_NO_ENERGY_DRV, 45)                 \
  X(AMDSMI_STATUS_NO_MSR_DRV, 46)                    \
  X(AMDSMI_STATUS_NO_HSMP_DRV, 47)                   \
  X(AMDSMI_STATUS_NO_HSMP_SUP, 48)                   \
  X(AMDSMI_STATUS_NO_HSMP_MSG_SUP, 49)               \
  X(AMDSMI_STATUS_HSMP_TIMEOUT, 50)                  \
  X(AMDSMI_STATUS_NO_DRV, 51)                        \
  X(AMDSMI_STATUS_FILE_NOT_FOUND, 52)                \
  X(AMDSMI_STATUS_ARG_PTR_NULL, 53)                  \
  X(AMDSMI_STATUS_AMDGPU_RESTART_ERR, 54)            \
  X(AMDSMI_STATUS_SETTING_UNAVAILABLE, 55)           \
  X(AMDSMI_STATUS_MAP_ERROR, 0xFFFFFFFEu)            \
  X(AMDSMI_STATUS_UNKNOWN_ERROR, 0xFFFFFFFFu)

#define AMDSMI_STATUS_SUCCESS ((amdsmi_status_t)0)
#define AMDSMI_STATUS_INVAL ((amdsmi_status_t)1)
#define AMDSMI_STATUS_NOT_SUPPORTED ((amdsmi_status_t)2)
#define AMDSMI_STATUS_NOT_YET_IMPLEMENTED ((amdsmi_status_t)3)
#define AMDSMI_STATUS_FAIL_LOAD_MODULE ((amdsmi_status_t)4)
#define AMDSMI_STATUS_FAIL_LOAD_SYMBOL ((amdsmi_status_t)5)
#define AMDSMI_STATUS_DRM_ERROR ((amdsmi_status_t)6)
#define AMDSMI_STATUS_API_FAILED ((amdsmi_status_t)7)
#define AMDSMI_STATUS_TIMEOUT ((amdsmi_status_t)8)
#define AMDSMI_STATUS_RETRY ((amdsmi_status_t)9)
#define AMDSMI_STATUS_NO_PERM ((amdsmi_status_t)10)
#define AMDSMI_STATUS_INTERRUPT ((amdsmi_status_t)11)
#define AMDSMI_STATUS_IO ((amdsmi_status_t)12)
#define AMDSMI_STATUS_ADDRESS_FAULT ((amdsmi_status_t)13)
#define AMDSMI_STATUS_FILE_ERROR ((amdsmi_status_t)14)
#define AMDSMI_STATUS_OUT_OF_RESOURCES ((amdsmi_status_t)15)
#define AMDSMI_STATUS_INTERNAL_EXCEPTION ((amdsmi_status_t)16)
#define AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS ((amdsmi_status_t)17)
#define AMDSMI_STATUS_INIT_ERROR ((amdsmi_status_t)18)
#define AMDSMI_STATUS_REFCOUNT_OVERFLOW ((amdsmi_status_t)19)
#define AMDSMI_STATUS_BUSY ((amdsmi_status_t)30)
#define AMDSMI_STATUS_NOT_FOUND ((amdsmi_status_t)31)
#define AMDSMI_STATUS_NOT_INIT ((amdsmi_status_t)32)
#define AMDSMI_STATUS_NO_SLOT ((amdsmi_status_t)33)
#define AMDSMI_STATUS_DRIVER_NOT_LOADED ((amdsmi_status_t)34)
#define AMDSMI_STATUS_NO_DATA ((amdsmi_status_t)40)
#define AMDSMI_STATUS_INSUFFICIENT_SIZE ((amdsmi_status_t)41)
#define AMDSMI_STATUS_UNEXPECTED_SIZE ((amdsmi_status_t)42)
#define AMDSMI_STATUS_UNEXPECTED_DATA ((amdsmi_status_t)43)
#define AMDSMI_STATUS_NON_AMD_CPU ((amdsmi_status_t)44)
#define AMDSMI_STATUS_NO_ENERGY_DRV ((amdsmi_status_t)45)
#define AMDSMI_STATUS_NO_MSR_DRV ((amdsmi_status_t)46)
#define AMDSMI_STATUS_NO_HSMP_DRV ((amdsmi_status_t)47)
#define AMDSMI_STATUS_NO_HSMP_SUP ((amdsmi_status_t)48)
#define AMDSMI_STATUS_NO_HSMP_MSG_SUP ((amdsmi_status_t)49)
#define AMDSMI_STATUS_HSMP_TIMEOUT ((amdsmi_status_t)50)
#define AMDSMI_STATUS_NO_DRV ((amdsmi_status_t)51)
#define AMDSMI_STATUS_FILE_NOT_FOUND ((amdsmi_status_t)52)
#define AMDSMI_STATUS_ARG_PTR_NULL ((amdsmi_status_t)53)
#define AMDSMI_STATUS_AMDGPU_RESTART_ERR ((amdsmi_status_t)54)
#define AMDSMI_STATUS_SETTING_UNAVAILABLE ((amdsmi_status_t)55)
#define AMDSMI_STATUS_MAP_ERROR ((amdsmi_status_t)0xFFFFFFFEu)
#define AMDSMI_STATUS_UNKNOWN_ERROR ((amdsmi_status_t)0xFFFFFFFFu)

/* amdsmi_init_flags_t */
#define AMDSMI_INIT_AMD_GPUS (1u << 1)
/* amdsmi_clk_type_t (GFX is SYS) */
#define AMDSMI_CLK_TYPE_SYS 0
#define AMDSMI_CLK_TYPE_GFX 0
#define AMDSMI_CLK_TYPE_MEM 4
/* amdsmi_temperature_type_t (JUNCTION is HOTSPOT) and amdsmi_temperature_metric_t */
#define AMDSMI_TEMPERATURE_TYPE_EDGE 0
#define AMDSMI_TEMPERATURE_TYPE_HOTSPOT 1
#define AMDSMI_TEMP_CURRENT 0
/* amdsmi_dev_perf_level_t */
#define AMDSMI_DEV_PERF_LEVEL_AUTO 0
#define AMDSMI_DEV_PERF_LEVEL_MANUAL 3

#define AMDSMI_MAX_STRING_LENGTH 64
#define AMDSMI_NORMAL_STRING_LENGTH 32
#define AMDSMI_256_LENGTH 256
#define AMDSMI_GPU_UUID_SIZE 38

/* Power-cap figures in microwatts (dpm_cap in MHz). */
typedef struct {
  uint64_t power_cap;
  uint64_t default_power_cap;
  uint64_t dpm_cap;
  uint64_t min_power_cap;
  uint64_t max_power_cap;
  uint64_t reserved[3];
} amdsmi_power_cap_info_t;

/* Socket powers in watts; an unsupported field reads 0xFFFF or 0xFFFFFFFF (the Python binding's
 * "N/A"). */
typedef struct {
  uint32_t current_socket_power;
  uint32_t average_socket_power;
  uint32_t gfx_voltage;
  uint32_t soc_voltage;
  uint32_t mem_voltage;
  uint32_t power_limit;
  uint32_t reserved[11];
} amdsmi_power_info_t;

/* Clocks in MHz. */
typedef struct {
  uint32_t clk;
  uint32_t min_clk;
  uint32_t max_clk;
  uint8_t clk_locked;
  uint8_t clk_deep_sleep;
  uint32_t reserved[4];
} amdsmi_clk_info_t;

typedef struct {
  char market_name[AMDSMI_256_LENGTH];
  uint32_t vendor_id;
  char vendor_name[AMDSMI_MAX_STRING_LENGTH];
  uint32_t subvendor_id;
  uint64_t device_id;
  uint32_t rev_id;
  char asic_serial[AMDSMI_NORMAL_STRING_LENGTH];
  uint32_t oam_id;
  uint32_t num_of_compute_units;
  uint64_t target_graphics_version;
  uint32_t reserved[15];
} amdsmi_asic_info_t;

typedef struct {
  char driver_version[AMDSMI_MAX_STRING_LENGTH];
  char driver_date[AMDSMI_MAX_STRING_LENGTH];
  char driver_name[AMDSMI_MAX_STRING_LENGTH];
} amdsmi_driver_info_t;

typedef struct {
  uint64_t kfd_id;
  uint32_t node_id;
  uint32_t current_partition_id;
  uint32_t reserved[12];
} amdsmi_kfd_info_t;

/* Bit fields as in amdsmi.h (function 3 bits, device 5, bus 8, domain 48, from the low end on
 * the little-endian targets we build for); we read and write as_uint only. */
typedef union {
  uint64_t as_uint;
} amdsmi_bdf_t;
#define ZEUS_AMDSMI_BDF(domain, bus, dev, fn)                                                   \
  ((((uint64_t)(domain)) << 16) | (((uint64_t)(bus) & 0xff) << 8) | (((uint64_t)(dev) & 0x1f) << 3) | \
   ((uint64_t)(fn) & 0x7))

typedef struct {
  uint32_t year;
  uint32_t major;
  uint32_t minor;
  uint32_t release;
  const char *build;
} amdsmi_version_t;

/* amdsmi_get_gpu_enumeration_info (ROCm 6.4+, amdsmi 25.x; absent from the header above): how the
 * other stacks number a GPU. Layout from ROCm/amdsmi's later amdsmi.h, where
 * AMDSMI_MAX_STRING_LENGTH is 256 (272 bytes in all). */
typedef struct {
  uint32_t drm_render; /* N of /sys/class/drm/renderDN */
  uint32_t drm_card;   /* N of /sys/class/drm/cardN */
  uint32_t hsa_id;
  uint32_t hip_id; /* the index HIP (and PyTorch's cuda:N) gives the GPU */
  char hip_uuid[AMDSMI_256_LENGTH];
} amdsmi_enumeration_info_t;

#endif
