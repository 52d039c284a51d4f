/* zeus/soc.h: systems on a chip whose CPU and GPU share one package: NVIDIA Jetson boards.
 *
 * A Jetson has no GPU energy counter that NVML could read; its INA3221 power monitors report
 * the power of a few supply rails in sysfs. libzeus reads them as the original Python package's
 * zeus.device.soc.jetson does:
 *
 *   Where:  <root>/bus/i2c/drivers/ina3221x (older kernels, L4T 32) or .../ina3221 (newer), each
 *           device folder under it (1-0040, ...), each folder under that (iio:device0, hwmon),
 *           and each hwmon* folder under that (newer kernels: 1-0040/hwmon/hwmon3). <root> is
 *           ZEUS_JETSON_ROOT when set, else /sys.
 *   Rails:  a rail is named by a file "rail_name_<N>" (older layout) or "in<N>_label" (newer);
 *           the name decides which of three rails it is, case-insensitively: containing "cpu",
 *           the CPU rail; else "gpu", the GPU rail; else "system", "_in" or "total", the total
 *           (board input) rail; other rails (VDD_SOC, VDDQ_VDD2_1V8AO, ...) are not measured. So
 *           Orin's VDD_CPU_GPU_CV is the CPU rail and VDD_IN the total, as in the original.
 *           When two files name the same rail, the first in name order is used.
 *   Power:  a power file when there is one (in_power<N>_input, or power<N>_input), read as mW;
 *           else voltage times current: in_voltage<N>_input (or in<N>_input) in mV times
 *           in_current<N>_input (or curr<N>_input) in mA, divided by 1000.
 *
 * A Jetson is recognised as the original does: Linux on aarch64 with
 * /usr/lib/aarch64-linux-gnu/tegra or /etc/nv_tegra_release present; or, on any machine,
 * ZEUS_JETSON_ROOT set (tests point it at a fake tree). Nothing else is ever taken for one.
 *
 * The rail files are opened once (without following a link in their last component) and kept
 * open; a reading is one pread() per file. They are usually readable by every user.
 *
 * Energy: the rails give power only. A monitor (zeus/monitor.h) samples them on its polling
 * thread and integrates (trapezoids) on the monotonic clock; windows report the integral as
 * their soc_energy_j.
 *
 * Thread safety: zeus_soc_power may be called from several threads on one handle.
 */
#ifndef ZEUS_SOC_H
#define ZEUS_SOC_H

#include "zeus/common.h"

ZEUS_BEGIN_DECLS

typedef struct zeus_soc zeus_soc;

/* The rails measured, in the order of the original's JetsonMeasurement fields. */
typedef enum zeus_soc_rail {
  ZEUS_SOC_RAIL_CPU = 0,   /* cpu_energy_mj of the original */
  ZEUS_SOC_RAIL_GPU = 1,   /* gpu_energy_mj */
  ZEUS_SOC_RAIL_TOTAL = 2, /* total_energy_mj: the board's input */
} zeus_soc_rail;
#define ZEUS_SOC_NUM_RAILS 3

/* Where a rail is read from. */
typedef struct zeus_soc_rail_desc {
  bool present;            /* the board has this rail */
  bool direct;             /* read from a power file (else voltage x current) */
  char label[64];          /* the rail's own name ("VDD_IN", "GPU") */
  char power_path[512];    /* the power file ("" unless direct) */
  char voltage_path[512];  /* the voltage and current files ("" when direct) */
  char current_path[512];
} zeus_soc_rail_desc;

/* "cpu", "gpu" or "total" (the words JSON reports and exporter labels use); "unknown" else. Static. */
ZEUS_EXTERN const char *zeus_soc_rail_name(zeus_soc_rail rail);

/* Whether this machine is a Jetson (see above): ZEUS_JETSON_ROOT set, or the original's test. */
ZEUS_EXTERN bool zeus_soc_jetson_available(void);

/* The folder standing for /sys: ZEUS_JETSON_ROOT, else "/sys". Static or the environment's. */
ZEUS_EXTERN const char *zeus_soc_jetson_root(void);

/* Opens the Jetson's rails: finds them and reads each once. Errors: ZEUS_ENOENT when this is no
 * Jetson or when no measurable rail is found (zeus_errmsg() names the folders looked at);
 * ZEUS_EIO when a rail file cannot be opened or does not hold a decimal number (naming the
 * file and what it holds); ZEUS_ENOMEM. A rail whose files are missing is skipped, as in the
 * original. */
ZEUS_EXTERN int zeus_soc_open(zeus_soc **out /* out */);
ZEUS_EXTERN void zeus_soc_close(zeus_soc *s);

/* The kind of SoC: "jetson". Static. */
ZEUS_EXTERN const char *zeus_soc_kind(const zeus_soc *s);

/* Whether rail `rail` is measured on this board. */
ZEUS_EXTERN bool zeus_soc_has_rail(const zeus_soc *s, zeus_soc_rail rail);

/* Where rail `rail` is read from. ZEUS_EINVAL for an unknown rail (a missing one is
 * out->present false, ZEUS_OK). */
ZEUS_EXTERN int zeus_soc_rail_info(const zeus_soc *s, zeus_soc_rail rail, zeus_soc_rail_desc *out /* out */);

/* The rail's power now in mW. ZEUS_ENOTSUP for a rail the board does not have; ZEUS_EIO naming
 * the file when a read fails or the file holds no decimal number. */
ZEUS_EXTERN int zeus_soc_power(zeus_soc *s, zeus_soc_rail rail, double *mw /* out */);

ZEUS_END_DECLS
#endif
