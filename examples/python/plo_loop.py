"""The power-limit optimizer in a plain training loop (the original's GlobalPowerLimitOptimizer example).

    ZEUS_GPU_BACKEND=sim python3 examples/python/plo_loop.py [profile.json]

Each power limit from the GPUs' maximum down to their minimum (25 W strides) is profiled for a
few steps during training; then the optimum of the selector (here ZeusCost with eta 0.5) stays
applied. With a profile path, a later run loads the file and applies the optimum at once. On real
NVIDIA GPUs, changing power limits needs root or CAP_SYS_ADMIN; the GPUs get their limits back
at the end (and on SIGTERM).
"""
import sys
import time

from zeusc.monitor import ZeusMonitor
from zeusc.optimizer.power_limit import GlobalPowerLimitOptimizer, ZeusCost


def main():
    monitor = ZeusMonitor()
    if monitor.devices.backend == "sim":
        node = monitor.devices.sim_node()
        train_step = lambda: node.work_all([1.0] * node.gpu_count())  # noqa: E731
    else:
        train_step = lambda: time.sleep(0.05)  # noqa: E731  (your training step)

    plo = GlobalPowerLimitOptimizer(
        monitor,
        optimum_selector=ZeusCost(eta_knob=0.5, world_size=len(monitor.gpu_indices)),
        warmup_steps=5,
        profile_steps=20,
        profile_path=sys.argv[1] if len(sys.argv) > 1 else None,
    )
    print(f"power limits to profile (W): {[w // 1000 for w in plo.power_limits]}")
    for epoch in range(3):
        plo.on_epoch_begin()
        for _ in range(150):
            plo.on_step_begin()
            train_step()
            plo.on_step_end()
        plo.on_epoch_end()
        print(f"epoch {epoch}: state {plo.state.name}, current limit {plo.current_power_limit // 1000} W")

    print("limit    time (s)   energy (J)")
    for m in plo.measurements:
        print(f"{m.power_limit:4d} W  {m.time:9.3f}  {m.energy:10.1f}")
    if plo.optimal_power_limit is not None:
        print(f"optimal power limit: {plo.optimal_power_limit // 1000} W")
    plo.close()   # the GPUs get back the limits they had (also at exit)


if __name__ == "__main__":
    main()
