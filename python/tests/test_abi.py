"""The ctypes mirrors of libzeus's structs and constants match the C headers: a small C program
compiled against include/ prints every size, offset and constant the binding relies on."""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

import pytest

import zeusc_testutil as tu
from zeusc import _lib

STRUCTS = {
    "zeus_monitor_opts": _lib.MonitorOpts,
    "zeus_measurement": _lib.MeasurementC,
    "zeus_window_detail": _lib.WindowDetailC,
    "zeus_devices_opts": _lib.DevicesOpts,
    "zeus_plo_measurement": _lib.PloMeasurement,
    "zeus_selector": _lib.Selector,
    "zeus_collective": _lib.Collective,
    "zeus_plo_opts": _lib.PloOpts,
    "zeus_pfo_freq": _lib.PfoFreq,
    "zeus_pfo_schedule": _lib.PfoSchedule,
    "zeus_power_monitor_opts": _lib.PowerMonitorOpts,
    "zeus_power_sample": _lib.PowerSampleC,
    "zeus_temperature_sample": _lib.TemperatureSampleC,
    "zeus_power_energy": _lib.PowerEnergyC,
    "zeus_power_monitor_stats": _lib.PowerMonitorStatsC,
    "zeus_job_opts": _lib.JobOpts,
    "zeus_job_info": _lib.JobInfo,
    "zeus_soc_rail_desc": _lib.SocRailDescC,
    "zeus_power_stream_server": _lib.PowerStreamServerC,
    "zeus_power_stream_opts": _lib.PowerStreamOptsC,
    "zeus_power_stream_event": _lib.PowerStreamEventC,
    "zeus_power_stream_status": _lib.PowerStreamStatusC,
}
if os.path.exists(os.path.join(tu.REPO, "include", "zeus", "pfo_client.h")):
    STRUCTS["zeus_pfo_optimizer_opts"] = _lib.PfoOptimizerOpts
    STRUCTS["zeus_pfo_round_stats"] = _lib.PfoRoundStats
    STRUCTS["zeus_pfo_class_stats"] = _lib.PfoClassStats
if os.path.exists(os.path.join(tu.REPO, "include", "zeus", "metric.h")):
    STRUCTS["zeus_metric_opts"] = _lib.MetricOpts
CONSTANTS = ["ZEUS_MAX_GPUS", "ZEUS_MAX_CPUS", "ZEUS_NAME_LEN", "ZEUS_SOC_RAIL_CPU", "ZEUS_SOC_RAIL_GPU",
             "ZEUS_SOC_RAIL_TOTAL", "ZEUS_SOC_NUM_RAILS", "ZEUS_OK", "ZEUS_EINVAL", "ZEUS_EIO",
             "ZEUS_EINTERNAL", "ZEUS_REDUCE_SUM", "ZEUS_REDUCE_MAX", "ZEUS_SELECTOR_ENERGY", "ZEUS_SELECTOR_TIME",
             "ZEUS_SELECTOR_ZEUS_COST", "ZEUS_SELECTOR_MAX_SLOWDOWN", "ZEUS_SELECTOR_CUSTOM", "ZEUS_PLO_READY",
             "ZEUS_PLO_WARMUP", "ZEUS_PLO_PROFILING", "ZEUS_PLO_DONE", "ZEUS_POWER_INSTANT", "ZEUS_POWER_AVERAGE",
             "ZEUS_POWER_MEMORY_AVERAGE", "ZEUS_POWER_MONITOR_NO_POWER", "ZEUS_METRIC_ENERGY_HISTOGRAM",
             "ZEUS_METRIC_ENERGY_COUNTER", "ZEUS_METRIC_POWER_GAUGE", "ZEUS_POWER_STREAM_GPU",
             "ZEUS_POWER_STREAM_CPU"]


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to check the struct layouts with")
    d = tmp_path_factory.mktemp("abi")
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <zeus.h>", "int main(void) {"]
    for cname, py in STRUCTS.items():
        lines.append(f'  printf("{cname} sizeof %zu\\n", sizeof({cname}));')
        for fname, _ in py._fields_:
            lines.append(f'  printf("{cname} {fname} %zu\\n", offsetof({cname}, {fname}));')
    for c in CONSTANTS:
        lines.append(f'  printf("const {c} %ld\\n", (long)({c}));')
    lines += ["  return 0;", "}"]
    src = d / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = d / "layout"
    subprocess.run([cc, "-std=c11", "-I", os.path.join(tu.REPO, "include"), str(src), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    table = {}
    for line in out.splitlines():
        a, b, v = line.split()
        table[(a, b)] = int(v)
    return table


@pytest.mark.parametrize("cname", list(STRUCTS))
def test_struct_layout_matches_the_header(c_layout, cname):
    py = STRUCTS[cname]
    assert ctypes.sizeof(py) == c_layout[(cname, "sizeof")]
    for fname, _ in py._fields_:
        assert getattr(py, fname).offset == c_layout[(cname, fname)], fname


def test_constants_match_the_headers(c_layout):
    for c in CONSTANTS:
        assert getattr(_lib, c) == c_layout[("const", c)], c


def test_error_classes_cover_every_status_code(lib):
    import zeusc.exceptions as ex
    # every code the library knows maps to a ZeusError subclass; the names come from the library
    for code in range(-1, -19, -1):
        name = lib.zeus_errname(code).decode()
        assert name.startswith("ZEUS_E") and name != "ZEUS_E?", code
        assert issubclass(ex.class_for(code), ex.ZeusError)
    expect = {"ZEUS_EINVAL": ValueError, "ZEUS_ERANGE": ValueError, "ZEUS_EEXIST": ValueError,
              "ZEUS_EPARSE": ValueError, "ZEUS_ENOENT": FileNotFoundError, "ZEUS_EPERM": PermissionError,
              "ZEUS_EIO": OSError, "ZEUS_ENOTSUP": NotImplementedError, "ZEUS_ENOMEM": MemoryError,
              "ZEUS_ETIMEDOUT": TimeoutError, "ZEUS_ENET": ConnectionError, "ZEUS_EDEVICE": RuntimeError,
              "ZEUS_EGPULOST": RuntimeError, "ZEUS_ESTATE": RuntimeError, "ZEUS_EINTERNAL": RuntimeError,
              "ZEUS_ENOLIB": RuntimeError, "ZEUS_EHTTP": RuntimeError, "ZEUS_EBUSY": RuntimeError}
    for code in range(-1, -19, -1):
        name = lib.zeus_errname(code).decode()
        assert issubclass(ex.class_for(code), expect[name]), name
