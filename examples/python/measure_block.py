"""Measure the time and energy of blocks of code with zeusc (the original's ZeusMonitor example).

    python3 examples/python/measure_block.py                          # every visible GPU
    ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2 python3 examples/python/measure_block.py   # no GPU needed

libzeus is found next to the zeusc package, through ZEUSC_LIBRARY, or in build/ of a checkout
(PYTHONPATH=python from the repository root).
"""
import time

from zeusc.monitor import ZeusMonitor


def make_step(monitor):
    """One 'training step': real work would go here. On simulated GPUs (ZEUS_GPU_BACKEND=sim)
    time moves only through simulated work, so the step runs some on every GPU."""
    if monitor.devices.backend == "sim":
        node = monitor.devices.sim_node()
        return lambda: node.work_all([4.0] * node.gpu_count())
    return lambda: time.sleep(0.05)


def main():
    # Measure every visible GPU (and CPU packages where RAPL is readable). With PyTorch imported,
    # window bounds wait for the GPU work queued so far (sync_execution_with="torch").
    monitor = ZeusMonitor()
    step = make_step(monitor)
    print(f"measuring GPUs {monitor.gpu_indices} on the {monitor.devices.backend!r} backend")

    monitor.begin_window("training")
    for epoch in range(2):
        monitor.begin_window("epoch")        # windows may nest and overlap
        for _ in range(10):
            step()
        m = monitor.end_window("epoch")
        print(f"epoch {epoch}: {m.time:.3f} s, {m.total_energy:.1f} J, per GPU {m.gpu_energy}")
    m = monitor.end_window("training")
    print(f"training: {m.time:.3f} s, {m.total_energy:.1f} J")

    monitor.begin_window("discarded")
    step()
    monitor.end_window("discarded", cancel=True)   # measured nothing, logged nothing


if __name__ == "__main__":
    main()
