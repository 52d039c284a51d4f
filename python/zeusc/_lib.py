"""Finding and loading libzeus, its C prototypes, and turning C status codes into exceptions.

Everything that touches ctypes directly lives here, so the rest of the package reads like the
original Python API. The library is loaded on first use (importing :mod:`zeusc` loads nothing).

Where the library is looked for, in order:

1. ``ZEUSC_LIBRARY``: the path of ``libzeus.so`` to load (an error if it does not exist; no
   fallback, so a typo is never silently replaced by another copy);
2. the build tree of a source checkout: ``<checkout>/build/libzeus.so`` when the package is
   imported from ``<checkout>/python`` (so a copy left next to the package in a checkout, which
   goes stale at the next build, never wins over the build);
3. next to the package: ``zeusc/libzeus.so*`` (bundled into the wheel by
   ``ZEUSC_BUNDLE_LIBRARY=build/libzeus.so pip install ./python``);
4. the system: ``libzeus.so.0`` through the dynamic loader (``make install`` puts it there).
"""
from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import glob
import logging
import os
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, byref, c_bool, c_char, c_char_p, c_double, c_int,
                    c_long, c_size_t, c_uint, c_uint64, c_ulong, c_void_p)

from . import exceptions as _exc

ENV_LIBRARY = "ZEUSC_LIBRARY"

# ---- constants mirrored from the headers ---------------------------------------------------------

ZEUS_MAX_GPUS = 64
ZEUS_MAX_CPUS = 16
ZEUS_NAME_LEN = 96
#: zeus_soc_rail (zeus/soc.h): the Jetson rails, in the order of the original's JetsonMeasurement.
ZEUS_SOC_RAIL_CPU = 0
ZEUS_SOC_RAIL_GPU = 1
ZEUS_SOC_RAIL_TOTAL = 2
ZEUS_SOC_NUM_RAILS = 3

ZEUS_OK = 0
ZEUS_EINVAL = -1
ZEUS_EIO = -9
ZEUS_EINTERNAL = -17
ZEUS_EBUSY = -18

ZEUS_REDUCE_SUM = 0
ZEUS_REDUCE_MAX = 1

ZEUS_SELECTOR_ENERGY = 0
ZEUS_SELECTOR_TIME = 1
ZEUS_SELECTOR_ZEUS_COST = 2
ZEUS_SELECTOR_MAX_SLOWDOWN = 3
ZEUS_SELECTOR_CUSTOM = 4

ZEUS_PLO_READY = 0
ZEUS_PLO_WARMUP = 1
ZEUS_PLO_PROFILING = 2
ZEUS_PLO_DONE = 3

#: The message (and skip reason in the tests) when the loaded libzeus lacks zeus/plo.h's functions.
PLO_MISSING = "C power-limit optimizer not in this libzeus"
#: The same for zeus/pfo_client.h (the Perseus client).
PFO_MISSING = "C Perseus client (zeus/pfo_client.h) not in this libzeus"

# ---- structures (zeus/*.h; tests/test_abi.py checks every size and offset against the C compiler)


class MeasurementC(Structure):
    """zeus_measurement (zeus/monitor.h)."""
    _fields_ = [
        ("time_s", c_double),
        ("num_gpus", c_uint),
        ("gpu_indices", c_uint * ZEUS_MAX_GPUS),
        ("gpu_energy_j", c_double * ZEUS_MAX_GPUS),
        ("num_cpus", c_uint),
        ("cpu_indices", c_uint * ZEUS_MAX_CPUS),
        ("cpu_energy_j", c_double * ZEUS_MAX_CPUS),
        ("dram_valid", c_bool * ZEUS_MAX_CPUS),
        ("dram_energy_j", c_double * ZEUS_MAX_CPUS),
        ("total_energy_j", c_double),
        ("start_time_s", c_double),
        ("soc_valid", c_bool),
        ("soc_rail_valid", c_bool * ZEUS_SOC_NUM_RAILS),
        ("soc_energy_j", c_double * ZEUS_SOC_NUM_RAILS),
        ("gpu_power_scope", c_int * ZEUS_MAX_GPUS),  # zeus_power_scope: 0 GPU, 1 module
    ]


END_HOOK_FN = CFUNCTYPE(c_int, c_void_p, c_char_p, POINTER(MeasurementC))


class MonitorOpts(Structure):
    """zeus_monitor_opts (zeus/monitor.h)."""
    _fields_ = [
        ("devices", c_void_p),
        ("gpu_indices", POINTER(c_uint)),
        ("num_gpu_indices", c_size_t),
        ("cpu_indices", POINTER(c_uint)),
        ("num_cpu_indices", c_size_t),
        ("approx_instant_energy", c_bool),
        ("log_file", c_char_p),
        ("poll_interval_s", c_double),
        ("force_power_polling", c_bool),
        ("no_short_window_warning", c_bool),
        ("end_hook", END_HOOK_FN),
        ("end_hook_ctx", c_void_p),
        ("energy_source", c_int),
        ("no_soc", c_bool),
    ]


class SocRailDescC(Structure):
    """zeus_soc_rail_desc (zeus/soc.h)."""
    _fields_ = [
        ("present", c_bool),
        ("direct", c_bool),
        ("label", c_char * 64),
        ("power_path", c_char * 512),
        ("voltage_path", c_char * 512),
        ("current_path", c_char * 512),
    ]


#: zeus_energy_source (zeus/monitor.h), by name.
ENERGY_SOURCES = {"auto": 0, "raw": 1, "sampled": 2, "polled": 3}


class WindowDetailC(Structure):
    """zeus_window_detail (zeus/monitor.h)."""
    _fields_ = [
        ("num_gpus", c_uint),
        ("source", c_int * ZEUS_MAX_GPUS),
        ("raw_energy_j", c_double * ZEUS_MAX_GPUS),
        ("corrected_energy_j", c_double * ZEUS_MAX_GPUS),
        ("error_bound_j", c_double * ZEUS_MAX_GPUS),
    ]


class PowerMonitorOpts(Structure):
    """zeus_power_monitor_opts (zeus/power_monitor.h)."""
    _fields_ = [
        ("devices", c_void_p),
        ("gpu_indices", POINTER(c_uint)),
        ("num_gpu_indices", c_size_t),
        ("domains", c_uint),
        ("period_s", c_double),
        ("temperature_period_s", c_double),
        ("max_samples", c_size_t),
        ("dedup", c_bool),
        ("epoch_time", c_bool),
        ("no_thread", c_bool),
    ]


class PowerSampleC(Structure):
    """zeus_power_sample (zeus/power_monitor.h)."""
    _fields_ = [("time_s", c_double), ("power_mw", c_uint)]


class TemperatureSampleC(Structure):
    """zeus_temperature_sample (zeus/power_monitor.h)."""
    _fields_ = [("time_s", c_double), ("celsius", c_uint)]


class PowerEnergyC(Structure):
    """zeus_power_energy (zeus/power_monitor.h)."""
    _fields_ = [("energy_j", c_double), ("mean_power_w", c_double), ("start_s", c_double), ("end_s", c_double),
                ("covered_s", c_double), ("samples", c_size_t)]


class PowerMonitorStatsC(Structure):
    """zeus_power_monitor_stats (zeus/power_monitor.h)."""
    _fields_ = [("polls", c_uint64), ("errors", c_uint64), ("zero_readings", c_uint64), ("dropped", c_uint64)]


class PowerStreamServerC(Structure):
    """zeus_power_stream_server (zeus/power_stream.h)."""
    _fields_ = [("address", c_char_p), ("token", c_char_p), ("gpu_ids", c_char_p), ("cpu_ids", c_char_p)]


class PowerStreamOptsC(Structure):
    """zeus_power_stream_opts (zeus/power_stream.h)."""
    _fields_ = [("servers", POINTER(PowerStreamServerC)), ("num_servers", c_size_t),
                ("reconnect_delay_s", c_double), ("max_reconnect_delay_s", c_double),
                ("stall_timeout_s", c_double), ("connect_timeout_s", c_double),
                ("max_line_bytes", c_size_t), ("max_devices", c_size_t), ("queue_max", c_size_t)]


class PowerStreamEventC(Structure):
    """zeus_power_stream_event (zeus/power_stream.h), also its zeus_power_stream_reading."""
    _fields_ = [("server", c_uint), ("kind", c_int), ("device", c_uint), ("timestamp_s", c_double),
                ("power_w", c_double), ("dram_w", c_double), ("seq", c_uint64)]


class PowerStreamStatusC(Structure):
    """zeus_power_stream_status (zeus/power_stream.h)."""
    _fields_ = [("connected", c_bool), ("gave_up", c_bool), ("connects", c_uint64), ("failures", c_uint64),
                ("events", c_uint64), ("bad_events", c_uint64), ("clock_offset_s", c_double),
                ("last_error", c_char * 256)]


ZEUS_POWER_STREAM_GPU = 0
ZEUS_POWER_STREAM_CPU = 1

ZEUS_POWER_INSTANT = 0
ZEUS_POWER_AVERAGE = 1
ZEUS_POWER_MEMORY_AVERAGE = 2
ZEUS_POWER_MONITOR_NO_POWER = 1 << 31


class MetricOpts(Structure):
    """zeus_metric_opts (zeus/metric.h)."""
    _fields_ = [
        ("url", c_char_p),
        ("job", c_char_p),
        ("label_names", POINTER(c_char_p)),
        ("label_values", POINTER(c_char_p)),
        ("num_labels", c_size_t),
        ("monitor", c_void_p),
        ("gpu_indices", POINTER(c_uint)),
        ("num_gpu_indices", c_size_t),
        ("cpu_indices", POINTER(c_uint)),
        ("num_cpu_indices", c_size_t),
        ("gpu_buckets_j", POINTER(c_double)),
        ("num_gpu_buckets", c_size_t),
        ("cpu_buckets_j", POINTER(c_double)),
        ("num_cpu_buckets", c_size_t),
        ("dram_buckets_j", POINTER(c_double)),
        ("num_dram_buckets", c_size_t),
        ("time_buckets_s", POINTER(c_double)),
        ("num_time_buckets", c_size_t),
        ("update_period_s", c_double),
        ("timeout_s", c_double),
    ]


ZEUS_METRIC_ENERGY_HISTOGRAM = 0
ZEUS_METRIC_ENERGY_COUNTER = 1
ZEUS_METRIC_POWER_GAUGE = 2


class JobOpts(Structure):
    """zeus_job_opts (zeus/bso.h)."""
    _fields_ = [
        ("batch_size", c_long),
        ("max_epochs", c_long),
        ("steps_per_epoch", c_long),
        ("eval_steps_per_epoch", c_long),
        ("monitor", c_void_p),
        ("collective", c_void_p),
        ("pl_step_w", c_uint),
        ("no_signal_handlers", c_bool),
    ]


class JobInfo(Structure):
    """zeus_job_info (zeus/bso.h)."""
    _fields_ = [
        ("target_metric", c_double),
        ("cost_threshold", c_double),
        ("eta", c_double),
        ("warmup_steps", c_long),
        ("measure_steps", c_long),
        ("use_optimal_pl", c_bool),
        ("log_dir", c_char_p),
        ("job_id", c_char_p),
        ("train_json", c_char_p),
        ("power_json", c_char_p),
        ("batch_size", c_long),
        ("num_gpus", c_uint),
        ("max_power_w", c_double),
        ("profiling", c_bool),
        ("optimal_power_limit_w", c_uint),
        ("epochs", c_long),
        ("energy_j", c_double),
        ("time_s", c_double),
        ("cost", c_double),
        ("reached", c_bool),
        ("finished", c_bool),
        ("predicted_cost", c_double),
        ("stopped_by_cost", c_bool),
    ]


class DevicesOpts(Structure):
    """zeus_devices_opts (zeus/device.h)."""
    _fields_ = [
        ("backend", c_char_p),
        ("nvml_library", c_char_p),
        ("visible_devices", c_char_p),
        ("all_devices", c_bool),
        ("sim", c_void_p),
        ("keep_settings_on_close", c_bool),
        ("daemon", c_char_p),
        ("daemon_override", c_bool),
        ("daemon_token", c_char_p),
    ]


class PloMeasurement(Structure):
    """zeus_plo_measurement (zeus/plo.h)."""
    _fields_ = [("power_limit_w", c_uint), ("energy_j", c_double), ("time_s", c_double)]


SELECTOR_FN = CFUNCTYPE(c_int, c_void_p, POINTER(PloMeasurement), c_size_t, POINTER(c_uint))


class Selector(Structure):
    """zeus_selector (zeus/plo.h)."""
    _fields_ = [
        ("kind", c_int),
        ("eta", c_double),
        ("world_size", c_uint),
        ("factor", c_double),
        ("fn", SELECTOR_FN),
        ("ctx", c_void_p),
    ]


ALLREDUCE_FN = CFUNCTYPE(c_int, c_void_p, POINTER(c_double), c_size_t, c_int)
BROADCAST_FN = CFUNCTYPE(c_int, c_void_p, c_void_p, c_size_t, c_int)


class Collective(Structure):
    """zeus_collective (zeus/collective.h)."""
    _fields_ = [
        ("ctx", c_void_p),
        ("rank", c_int),
        ("world_size", c_int),
        ("allreduce", ALLREDUCE_FN),
        ("broadcast", BROADCAST_FN),
    ]


class PloOpts(Structure):
    """zeus_plo_opts (zeus/plo.h)."""
    _fields_ = [
        ("selector", POINTER(Selector)),
        ("wait_steps", c_long),
        ("warmup_steps", c_long),
        ("profile_steps", c_long),
        ("pl_step_w", c_uint),
        ("profile_path", c_char_p),
        ("collective", POINTER(Collective)),
        ("no_signal_handlers", c_bool),
        ("confidence", c_double),
        ("max_profile_steps", c_long),
    ]


SYNC_FN = CFUNCTYPE(c_int, c_void_p)


class PfoOptimizerOpts(Structure):
    """zeus_pfo_optimizer_opts (zeus/pfo_client.h)."""
    _fields_ = [
        ("rank", c_int), ("dp_rank", c_int), ("pp_rank", c_int), ("tp_rank", c_int),
        ("dp_degree", c_int), ("pp_degree", c_int), ("tp_degree", c_int), ("world_size", c_int),
        ("device_id", c_uint),
        ("devices", c_void_p),
        ("server_url", c_char_p),
        ("job_metadata", c_char_p),
        ("job_id", c_char_p),
        ("collective", POINTER(Collective)),
        ("pipe_schedule", POINTER(c_char_p)),
        ("n_pipe_schedule", c_size_t),
        ("iters_per_round", c_long),
        ("sync", SYNC_FN),
        ("sync_ctx", c_void_p),
        ("no_instruction_profiling", c_bool),
        ("no_signal_handlers", c_bool),
        ("controller_poll_s", c_double),
        ("connect_timeout_s", c_double),
        ("request_timeout_s", c_double),
        ("schedule_timeout_s", c_double),
        ("retries", c_int),
        ("retry_backoff_s", c_double),
        ("token", c_char_p),
        ("instruction_energy", c_int),
        ("clock_latency_s", c_double),
    ]


class PfoFreq(Structure):
    """zeus_pfo_freq (zeus/pfo.h)."""
    _fields_ = [("instruction", c_char_p), ("frequency_mhz", c_int)]


class PfoSchedule(Structure):
    """zeus_pfo_schedule (zeus/pfo.h)."""
    _fields_ = [("rank", c_int), ("frequencies", POINTER(PfoFreq)), ("n_frequencies", c_size_t)]


class PfoRoundStats(Structure):
    """zeus_pfo_round_stats (zeus/pfo_client.h)."""
    _fields_ = [("round", c_long), ("iterations", c_long), ("iter_time_s", c_double), ("iter_energy_j", c_double),
                ("planned_clock_fraction", c_double), ("clock_late", c_long), ("energy_fitted", c_bool)]


class PfoClassStats(Structure):
    """zeus_pfo_class_stats (zeus/pfo_client.h)."""
    _fields_ = [("instruction", c_char_p), ("planned_mhz", c_uint), ("count", c_long), ("mean_time_s", c_double),
                ("mean_energy_j", c_double), ("planned_clock_fraction", c_double)]


LOG_FN = CFUNCTYPE(None, c_int, c_char_p, c_char_p, c_void_p)

# ---- prototypes ----------------------------------------------------------------------------------

_P = POINTER
_VP = c_void_p
# name: (restype, argtypes). Every function here is in the library that main builds.
_REQUIRED = {
    "zeus_version": (c_char_p, []),
    "zeus_version_hex": (c_uint, []),
    "zeus_strerror": (c_char_p, [c_int]),
    "zeus_errname": (c_char_p, [c_int]),
    "zeus_errmsg": (c_char_p, []),
    "zeus_errcode": (c_int, []),
    # variadic in C; called only as (code, "%s", message), which is ABI-safe on the platforms
    # the library builds on (Linux x86-64 and aarch64).
    "zeus_set_errmsg": (c_int, [c_int, c_char_p, c_char_p]),
    "zeus_set_log_callback": (None, [LOG_FN, _VP]),
    "zeus_set_log_level": (None, [c_int]),
    "zeus_get_log_level": (c_int, []),
    "zeus_log_level_parse": (c_int, [c_char_p, _P(c_int)]),
    "zeus_monotonic_s": (c_double, []),
    "zeus_free": (None, [_VP]),
    # devices
    "zeus_devices_open": (c_int, [_P(_VP), _P(DevicesOpts)]),
    "zeus_devices_close": (None, [_VP]),
    "zeus_devices_default": (c_int, [_P(_VP)]),
    "zeus_devices_backend": (c_char_p, [_VP]),
    "zeus_devices_now": (c_double, [_VP]),
    "zeus_devices_restore": (c_int, [_VP]),
    "zeus_devices_restore_all": (None, []),
    "zeus_gpu_count": (c_uint, [_VP]),
    "zeus_gpu_name": (c_int, [_VP, c_uint, c_char_p, c_size_t]),
    "zeus_gpu_uuid": (c_int, [_VP, c_uint, c_char_p, c_size_t]),
    "zeus_gpu_energy_counter_supported": (c_int, [_VP, c_uint, _P(c_bool)]),
    "zeus_gpu_power_limit_constraints": (c_int, [_VP, c_uint, _P(c_uint), _P(c_uint), _P(c_uint)]),
    "zeus_gpu_get_power_limit": (c_int, [_VP, c_uint, _P(c_uint)]),
    "zeus_gpu_set_power_limit": (c_int, [_VP, c_uint, c_uint]),
    "zeus_gpu_get_persistence_mode": (c_int, [_VP, c_uint, _P(c_bool)]),
    "zeus_gpu_set_persistence_mode": (c_int, [_VP, c_uint, c_bool]),
    "zeus_gpu_total_energy": (c_int, [_VP, c_uint, _P(c_uint64)]),
    "zeus_gpu_instant_power": (c_int, [_VP, c_uint, _P(c_uint)]),
    "zeus_gpu_power": (c_int, [_VP, c_uint, c_int, _P(c_uint)]),
    "zeus_gpu_power_scope": (c_int, [_VP, c_uint, _P(c_int)]),
    "zeus_power_scope_name": (c_char_p, [c_int]),
    "zeus_gpu_temperature": (c_int, [_VP, c_uint, _P(c_uint)]),
    "zeus_gpu_current_clocks": (c_int, [_VP, c_uint, _P(c_uint), _P(c_uint)]),
    "zeus_gpu_architecture": (c_int, [_VP, c_uint, _P(c_uint)]),
    "zeus_gpu_architecture_name": (c_char_p, [c_uint]),
    "zeus_devices_driver_version": (c_int, [_VP, c_char_p, c_size_t]),
    "zeus_devices_library_version": (c_int, [_VP, c_char_p, c_size_t]),
    "zeus_gpu_supported_memory_clocks": (c_int, [_VP, c_uint, _P(c_uint), _P(c_size_t)]),
    "zeus_gpu_supported_graphics_clocks": (c_int, [_VP, c_uint, c_uint, _P(c_uint), _P(c_size_t)]),
    "zeus_gpu_set_locked_clocks": (c_int, [_VP, c_uint, c_uint, c_uint]),
    "zeus_gpu_reset_locked_clocks": (c_int, [_VP, c_uint]),
    "zeus_gpu_set_memory_locked_clocks": (c_int, [_VP, c_uint, c_uint, c_uint]),
    "zeus_gpu_reset_memory_locked_clocks": (c_int, [_VP, c_uint]),
    "zeus_gpu_reset_all_clocks": (c_int, [_VP, c_uint]),
    "zeus_cpu_count": (c_uint, []),
    "zeus_cpu_energy": (c_int, [c_uint, _P(c_uint64), _P(c_bool), _P(c_uint64)]),
    "zeus_wall_s": (c_double, []),
    # monitor
    "zeus_monitor_open": (c_int, [_P(_VP), _P(MonitorOpts)]),
    "zeus_monitor_close": (None, [_VP]),
    "zeus_monitor_begin_window": (c_int, [_VP, c_char_p, c_bool]),
    "zeus_monitor_end_window": (c_int, [_VP, c_char_p, c_bool, _P(MeasurementC)]),
    "zeus_monitor_is_open": (c_bool, [_VP, c_char_p]),
    "zeus_monitor_num_gpus": (c_uint, [_VP]),
    "zeus_monitor_gpu_index": (c_uint, [_VP, c_uint]),
    "zeus_monitor_num_cpus": (c_uint, [_VP]),
    "zeus_monitor_gpu_polled": (c_bool, [_VP, c_uint]),
    "zeus_monitor_end_window_detail": (c_int, [_VP, c_char_p, c_bool, _P(MeasurementC), _P(WindowDetailC)]),
    "zeus_monitor_gpu_energy_source": (c_int, [_VP, c_uint]),
    "zeus_monitor_sampler_cpu_s": (c_double, [_VP]),
    "zeus_monitor_gpu_energy_now": (c_int, [_VP, c_uint, _P(c_double)]),
    "zeus_monitor_devices": (_VP, [_VP]),
    "zeus_monitor_soc": (_VP, [_VP]),
    "zeus_monitor_soc_energy_now": (c_int, [_VP, c_int, _P(c_double)]),
    # SoC rails (zeus/soc.h)
    "zeus_soc_rail_name": (c_char_p, [c_int]),
    "zeus_soc_jetson_available": (c_bool, []),
    "zeus_soc_jetson_root": (c_char_p, []),
    "zeus_soc_open": (c_int, [_P(_VP)]),
    "zeus_soc_close": (None, [_VP]),
    "zeus_soc_kind": (c_char_p, [_VP]),
    "zeus_soc_has_rail": (c_bool, [_VP, c_int]),
    "zeus_soc_rail_info": (c_int, [_VP, c_int, _P(SocRailDescC)]),
    "zeus_soc_power": (c_int, [_VP, c_int, _P(c_double)]),
    "zeus_monitor_window_state": (c_int, [_VP, c_char_p, _P(MeasurementC)]),
    "zeus_monitor_num_windows": (c_size_t, [_VP]),
    "zeus_monitor_window_key": (c_int, [_VP, c_size_t, c_char_p, c_size_t]),
    "zeus_monitor_reset_windows": (None, [_VP]),
    # power and temperature timelines
    "zeus_power_monitor_open": (c_int, [_P(_VP), _P(PowerMonitorOpts)]),
    "zeus_power_monitor_close": (None, [_VP]),
    "zeus_power_monitor_stop": (None, [_VP]),
    "zeus_power_monitor_running": (c_bool, [_VP]),
    "zeus_power_monitor_sample": (c_int, [_VP]),
    "zeus_power_monitor_now": (c_double, [_VP]),
    "zeus_power_monitor_num_gpus": (c_uint, [_VP]),
    "zeus_power_monitor_gpu_index": (c_uint, [_VP, c_uint]),
    "zeus_power_monitor_domains": (c_uint, [_VP]),
    "zeus_power_monitor_has_temperature": (c_bool, [_VP]),
    "zeus_power_monitor_period": (c_double, [_VP]),
    "zeus_power_monitor_temperature_period": (c_double, [_VP]),
    "zeus_power_monitor_get_stats": (None, [_VP, _P(PowerMonitorStatsC)]),
    "zeus_power_monitor_timeline": (c_int, [_VP, c_int, c_uint, c_double, c_double, _P(_P(PowerSampleC)),
                                            _P(c_size_t)]),
    "zeus_power_monitor_temperature_timeline": (c_int, [_VP, c_uint, c_double, c_double,
                                                        _P(_P(TemperatureSampleC)), _P(c_size_t)]),
    "zeus_power_monitor_energy": (c_int, [_VP, c_int, c_uint, c_double, c_double, _P(PowerEnergyC)]),
    "zeus_power_monitor_power_at": (c_int, [_VP, c_int, c_uint, c_double, _P(PowerSampleC)]),
    "zeus_power_monitor_temperature_at": (c_int, [_VP, c_uint, c_double, _P(TemperatureSampleC)]),
    # simulated GPUs
    "zeus_devices_sim_node": (_VP, [_VP]),
    "zeus_devices_sim_index": (c_int, [_VP, c_uint, _P(c_uint)]),
    "zeus_sim_node_gpu_count": (c_uint, [_VP]),
    "zeus_sim_now": (c_double, [_VP]),
    "zeus_sim_work": (c_int, [_VP, c_uint, c_double, _P(c_double)]),
    "zeus_sim_work_all": (c_int, [_VP, _P(c_double), _P(c_double)]),
    "zeus_sim_idle": (c_int, [_VP, c_double]),
    "zeus_sim_true_energy": (c_int, [_VP, c_uint, _P(c_double)]),
    "zeus_sim_gpu_set_load": (c_int, [_VP, c_uint, c_bool]),
    # collectives
    "zeus_collective_check": (c_int, [_P(Collective)]),
    "zeus_collective_allreduce": (c_int, [_P(Collective), _P(c_double), c_size_t, c_int]),
    "zeus_collective_broadcast": (c_int, [_P(Collective), c_void_p, c_size_t, c_int]),
    # the power streams of many daemons (zeus/power_stream.h)
    "zeus_power_stream_opts_init": (None, [_P(PowerStreamOptsC)]),
    "zeus_power_stream_open": (c_int, [_P(_VP), _P(PowerStreamOptsC)]),
    "zeus_power_stream_close": (None, [_VP]),
    "zeus_power_stream_endpoint": (c_char_p, [_VP, c_size_t]),
    "zeus_power_stream_num_servers": (c_size_t, [_VP]),
    "zeus_power_stream_snapshot": (c_int, [_VP, _P(_P(PowerStreamEventC)), _P(c_size_t)]),
    "zeus_power_stream_next": (c_int, [_VP, c_double, _P(PowerStreamEventC)]),
    "zeus_power_stream_wait": (c_int, [_VP, c_uint64, c_double, _P(c_uint64)]),
    "zeus_power_stream_dropped": (c_uint64, [_VP]),
    "zeus_power_stream_server_status": (c_int, [_VP, c_size_t, _P(PowerStreamStatusC)]),
    "zeus_power_stream_parse_event": (c_int, [c_char_p, c_size_t, c_int, _P(PowerStreamEventC)]),
}

# zeus/plo.h: the power-limit optimizer. Bound when the loaded library has them (a libzeus older
# than the optimizer does not); has("zeus_plo_open") says whether it does.
_PLO = {
    "zeus_selector_energy": (c_int, [_P(Selector)]),
    "zeus_selector_time": (c_int, [_P(Selector)]),
    "zeus_selector_zeus_cost": (c_int, [_P(Selector), c_double, c_uint]),
    "zeus_selector_max_slowdown": (c_int, [_P(Selector), c_double]),
    "zeus_selector_custom": (c_int, [_P(Selector), SELECTOR_FN, c_void_p]),
    "zeus_selector_select": (c_int, [_P(Selector), _P(PloMeasurement), c_size_t, _P(c_uint)]),
    "zeus_cost": (c_double, [c_double, c_double, c_double, c_double]),
    "zeus_plo_profile_load": (c_int, [c_char_p, _P(_P(PloMeasurement)), _P(c_size_t)]),
    "zeus_plo_profile_save": (c_int, [c_char_p, _P(PloMeasurement), c_size_t]),
    "zeus_plo_opts_init": (None, [_P(PloOpts)]),
    "zeus_plo_open": (c_int, [_P(_VP), _VP, _P(PloOpts)]),
    "zeus_plo_close": (None, [_VP]),
    "zeus_plo_on_step_begin": (c_int, [_VP]),
    "zeus_plo_on_step_end": (c_int, [_VP]),
    "zeus_plo_on_epoch_begin": (c_int, [_VP]),
    "zeus_plo_on_epoch_end": (c_int, [_VP]),
    "zeus_plo_get_state": (c_int, [_VP]),
    "zeus_plo_steps_left": (c_long, [_VP]),
    "zeus_plo_next_power_limit_w": (c_uint, [_VP]),
    "zeus_plo_current_power_limit_w": (c_uint, [_VP]),
    "zeus_plo_optimal_power_limit_w": (c_uint, [_VP]),
    "zeus_plo_measurements": (c_size_t, [_VP, _P(_P(PloMeasurement))]),
    "zeus_plo_power_limits": (c_size_t, [_VP, _P(_P(c_uint))]),
    "zeus_plo_set_epoch_steps": (c_int, [_VP, c_long]),
    "zeus_plo_contenders": (c_size_t, [_VP, _P(_P(c_uint))]),
    "zeus_plo_confidence": (c_double, [_VP]),
}

# zeus/pfo_client.h: the Perseus client (PipelineFrequencyOptimizer), the optional component
# ZEUS_WITH_PFO_CLIENT of libzeus: bound when the loaded library has it.
_PFO = {
    "zeus_pfo_optimizer_opts_init": (None, [_P(PfoOptimizerOpts)]),
    "zeus_pfo_optimizer_opts_from_env": (c_int, [_P(PfoOptimizerOpts)]),
    "zeus_pfo_optimizer_open": (c_int, [_P(_VP), _P(PfoOptimizerOpts)]),
    "zeus_pfo_optimizer_close": (None, [_VP]),
    "zeus_pfo_on_step_begin": (c_int, [_VP]),
    "zeus_pfo_on_step_end": (c_int, [_VP]),
    "zeus_pfo_on_instruction_begin": (c_int, [_VP, c_char_p]),
    "zeus_pfo_on_instruction_end": (c_int, [_VP, c_char_p]),
    "zeus_pfo_job_id": (c_char_p, [_VP]),
    "zeus_pfo_current_schedule": (_P(PfoSchedule), [_VP]),
    "zeus_pfo_optimizer_controller": (_VP, [_VP]),
    "zeus_pfo_detached": (c_bool, [_VP]),
    "zeus_pfo_last_round": (None, [_VP, _P(PfoRoundStats)]),
    "zeus_pfo_last_round_classes": (c_size_t, [_VP, _P(PfoClassStats), c_size_t]),
    "zeus_pfo_controller_wait": (c_int, [_VP, c_double]),
    "zeus_pfo_controller_frequencies": (c_size_t, [_VP, _P(_P(c_uint))]),
    "zeus_pfo_controller_current_mhz": (c_uint, [_VP]),
    "zeus_pfo_controller_set_frequency": (c_int, [_VP, c_uint]),
    "zeus_pfo_controller_changes": (c_ulong, [_VP]),
}

# zeus/bso.h: the training side of recurring jobs (zeus_job), wrapped by zeusc.run.
_JOB = {
    "zeus_job_open": (c_int, [_P(_VP), _P(JobOpts)]),
    "zeus_job_close": (None, [_VP]),
    "zeus_job_next_epoch": (c_int, [_VP, _P(c_bool), _P(c_long)]),
    "zeus_job_train_begin": (c_int, [_VP]),
    "zeus_job_train_step_begin": (c_int, [_VP]),
    "zeus_job_train_step_end": (c_int, [_VP]),
    "zeus_job_train_end": (c_int, [_VP]),
    "zeus_job_eval_begin": (c_int, [_VP]),
    "zeus_job_eval_step_begin": (c_int, [_VP]),
    "zeus_job_eval_step_end": (c_int, [_VP]),
    "zeus_job_eval_end": (c_int, [_VP]),
    "zeus_job_report_metric": (c_int, [_VP, c_double, c_bool]),
    "zeus_job_get_info": (None, [_VP, _P(JobInfo)]),
}

# zeus/metric.h: windows pushed to a Prometheus Pushgateway, the optional component
# ZEUS_WITH_METRICS_PUSH of libzeus: bound when the loaded library has it.
_METRIC = {
    "zeus_metric_opts_init": (None, [_P(MetricOpts)]),
    "zeus_metric_open": (c_int, [_P(_VP), c_int, _P(MetricOpts)]),
    "zeus_metric_close": (None, [_VP]),
    "zeus_metric_begin_window": (c_int, [_VP, c_char_p]),
    "zeus_metric_end_window": (c_int, [_VP, c_char_p]),
    "zeus_metric_record": (c_int, [_VP, c_char_p, _P(MeasurementC)]),
    "zeus_metric_push": (c_int, [_VP]),
    "zeus_metric_text": (c_int, [_VP, _P(c_void_p)]),
    "zeus_metric_push_url": (c_int, [_VP, _P(c_void_p)]),
}

_OPTIONAL = dict(_PLO)
_OPTIONAL.update(_METRIC)
_OPTIONAL.update(_PFO)
_OPTIONAL.update(_JOB)

# ---- loading -------------------------------------------------------------------------------------

_lock = threading.RLock()
_lib: ctypes.CDLL | None = None
_path: str | None = None
_log_cb = None  # keeps the log callback alive for as long as the library holds it


def _package_dir() -> str:
    return os.path.dirname(os.path.abspath(__file__))


def candidates() -> list[str]:
    """The places looked at, in order (ZEUSC_LIBRARY alone when it is set)."""
    env = os.environ.get(ENV_LIBRARY)
    if env:
        return [env]
    out = []
    here = _package_dir()
    checkout = os.path.dirname(os.path.dirname(here))
    if os.path.basename(os.path.dirname(here)) == "python" and os.path.exists(os.path.join(checkout, "CMakeLists.txt")):
        out.append(os.path.join(checkout, "build", "libzeus.so"))
    for name in ("libzeus.so", "libzeus.so.0"):
        out.append(os.path.join(here, name))
    out.extend(sorted(glob.glob(os.path.join(here, "libzeus.so.*"))))
    sysname = ctypes.util.find_library("zeus")
    out.append(sysname or "libzeus.so.0")
    seen, uniq = set(), []
    for c in out:
        if c not in seen:
            seen.add(c)
            uniq.append(c)
    return uniq


def _bind(lib: ctypes.CDLL, table: dict, required: bool) -> None:
    for name, (res, args) in table.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            if required:
                raise ImportError(
                    f"zeusc: the library {_path} lacks {name}: it is not a libzeus this binding "
                    f"supports (rebuild libzeus, or point {ENV_LIBRARY} at a current build)") from None
            continue
        fn.restype = res
        fn.argtypes = args


def _load() -> ctypes.CDLL:
    global _lib, _path
    env = os.environ.get(ENV_LIBRARY)
    errors = []
    for cand in candidates():
        is_path = os.sep in cand
        if is_path and not os.path.exists(cand):
            if env:
                raise ImportError(f"zeusc: {ENV_LIBRARY}={env!r} does not exist")
            errors.append(f"{cand}: not found")
            continue
        try:
            lib = ctypes.CDLL(cand)
        except OSError as e:
            if env:
                raise ImportError(f"zeusc: cannot load {ENV_LIBRARY}={env!r}: {e}") from None
            errors.append(f"{cand}: {e}")
            continue
        _path = os.path.realpath(cand) if is_path else cand
        _bind(lib, _REQUIRED, True)
        _bind(lib, _OPTIONAL, False)
        _lib = lib
        _install_log_sink(lib)
        return lib
    raise ImportError(
        f"zeusc: cannot find libzeus. Build it (make build), then set {ENV_LIBRARY} to build/libzeus.so, "
        "bundle it (ZEUSC_BUNDLE_LIBRARY=build/libzeus.so pip install ./python), or install it "
        "(make install). Tried:\n  "
        + "\n  ".join(errors))


def lib() -> ctypes.CDLL:
    """The loaded libzeus (loaded on first call). Raises ImportError saying where it looked."""
    if _lib is not None:
        return _lib
    with _lock:
        return _lib if _lib is not None else _load()


def library_path() -> str:
    """The file the binding loaded libzeus from."""
    lib()
    return _path  # type: ignore[return-value]


def has(name: str) -> bool:
    """Whether the loaded library exports `name` (e.g. "zeus_plo_open")."""
    return hasattr(lib(), name)


def require_plo() -> ctypes.CDLL:
    """The library, or RuntimeError when it lacks the power-limit optimizer (zeus/plo.h)."""
    L = lib()
    if not hasattr(L, "zeus_plo_open"):
        raise _exc.ZeusUnavailableError(
            f"{PLO_MISSING} ({library_path()} exports no zeus_plo_open): build libzeus from a tree "
            "that implements zeus/plo.h (src/plo/)")
    return L


def require_pfo() -> ctypes.CDLL:
    """The library, or RuntimeError when it lacks the Perseus client (zeus/pfo_client.h)."""
    L = lib()
    if not hasattr(L, "zeus_pfo_optimizer_open"):
        raise _exc.ZeusUnavailableError(
            f"{PFO_MISSING} ({library_path()} exports no zeus_pfo_optimizer_open): build libzeus from a "
            "tree that implements zeus/pfo_client.h (src/pfo_client/), configured with "
            "-DZEUS_WITH_PFO_CLIENT=ON (the default)")
    return L


METRIC_MISSING = "Pushgateway metrics (zeus/metric.h) not in this libzeus"


def require_metric() -> ctypes.CDLL:
    """The library, or ZeusUnavailableError when it lacks zeus/metric.h."""
    L = lib()
    if not hasattr(L, "zeus_metric_open"):
        raise _exc.ZeusUnavailableError(
            f"{METRIC_MISSING} ({library_path()} exports no zeus_metric_open): build libzeus "
            "configured with -DZEUS_WITH_METRICS_PUSH=ON (the default; it needs libcurl)")
    return L


def c_free(ptr) -> None:
    """Releases memory libzeus allocated for the caller, with zeus_free() (zeus.h: one release
    function for everything the library hands out, whatever C runtime it was built against)."""
    lib().zeus_free(ptr)


# ---- errors --------------------------------------------------------------------------------------


def errmsg(code: int) -> str:
    """This thread's message for the failure `code`, or the code's description."""
    L = lib()
    msg = L.zeus_errmsg()
    if msg and L.zeus_errcode() == code:
        return msg.decode("utf-8", "replace")
    return L.zeus_strerror(code).decode()


def error(code: int, overrides: dict | None = None, prefix: str = "") -> Exception:
    """The Python exception for C status `code`, carrying the C library's message."""
    L = lib()
    msg = errmsg(code)
    name = L.zeus_errname(code).decode()
    cls = (overrides or {}).get(code) or _exc.class_for(code)
    e = cls(prefix + msg)
    e.code = code
    e.errname = name
    return e


def check(rc: int, overrides: dict | None = None) -> int:
    """Raises the mapped exception when rc is a negative ZEUS_E... code; returns rc otherwise."""
    if rc < 0:
        raise error(rc, overrides)
    return rc


def set_errmsg(code: int, message: str) -> int:
    """Sets this thread's libzeus failure (for callbacks the library calls) and returns code."""
    return lib().zeus_set_errmsg(code, b"%s", message.encode("utf-8", "replace"))


# ---- logging: libzeus's log lines go to the Python logger "zeusc.<module>" ------------------------

_LEVELS = {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO, 3: logging.DEBUG}


def _log_sink(level, module, msg, _ud):
    try:
        name = "zeusc." + (module.decode() if module else "lib")
        logging.getLogger(name).log(_LEVELS.get(level, logging.INFO), "%s",
                                    msg.decode("utf-8", "replace") if msg else "")
    except Exception:  # a log line must never raise into C
        pass


def _install_log_sink(L: ctypes.CDLL) -> None:
    global _log_cb
    level = os.environ.get("ZEUS_LOG_LEVEL")
    if level:
        out = c_int()
        if L.zeus_log_level_parse(level.encode(), byref(out)) != ZEUS_OK:
            raise ImportError(f"zeusc: ZEUS_LOG_LEVEL: {errmsg(ZEUS_EINVAL)}")
        L.zeus_set_log_level(out.value)
    _log_cb = LOG_FN(_log_sink)
    L.zeus_set_log_callback(_log_cb, None)
    atexit.register(_uninstall_log_sink)


def _uninstall_log_sink() -> None:
    # C code that runs after the interpreter is gone (atexit handlers of libzeus) must not call
    # back into Python.
    if _lib is not None:
        _lib.zeus_set_log_callback(LOG_FN(), None)


def set_log_level(level) -> None:
    """Sets libzeus's log level: "error", "warn", "info", "debug", "off" or 0-3."""
    L = lib()
    out = c_int()
    check(L.zeus_log_level_parse(str(level).encode(), byref(out)))
    L.zeus_set_log_level(out.value)


def fs_bytes(path) -> bytes:
    """A path-like as the bytes the C library opens."""
    return os.fsencode(os.fspath(path))


__all__ = ["lib", "library_path", "has", "require_plo", "require_pfo", "check", "error", "set_errmsg", "set_log_level"]
