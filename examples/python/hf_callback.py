"""The power-limit optimizer as a Hugging Face Trainer callback (HFGlobalPowerLimitOptimizer).

    ZEUS_GPU_BACKEND=sim python3 examples/python/hf_callback.py

With transformers installed you would pass the callback to your real Trainer:

    trainer = Trainer(model=model, args=args, train_dataset=ds,
                      callbacks=[HFGlobalPowerLimitOptimizer(monitor)])

Without it, this example uses the stand-in Trainer of zeusc's tests (python/tests/stand_in),
which calls the callback events the way transformers' Trainer does, and a 'model' that runs
simulated work.
"""
import os
import sys

try:
    import transformers
except ImportError:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "python", "tests", "stand_in"))
    import transformers
    print("transformers is not installed: using zeusc's stand-in Trainer")

from zeusc.monitor import ZeusMonitor
from zeusc.optimizer.power_limit import HFGlobalPowerLimitOptimizer


def main():
    monitor = ZeusMonitor()
    callback = HFGlobalPowerLimitOptimizer(monitor, warmup_steps=5, profile_steps=20,
                                           profile_path=sys.argv[1] if len(sys.argv) > 1 else None)
    if getattr(transformers, "IS_ZEUSC_STAND_IN", False):
        node = monitor.devices.sim_node() if monitor.devices.backend == "sim" else None
        model = (lambda batch: node.work_all([1.0] * node.gpu_count())) if node else (lambda batch: None)
        trainer = transformers.Trainer(model=model, args=transformers.TrainingArguments(num_train_epochs=3),
                                       train_dataset=range(150), callbacks=[callback])
        trainer.train()
    else:
        print("transformers is installed: pass the callback to your Trainer as shown above")
        return
    plo = callback.optimizer
    print(f"state {plo.state.name}; measured limits (W): {[m.power_limit for m in plo.measurements]}")
    if plo.optimal_power_limit is not None:
        print(f"optimal power limit: {plo.optimal_power_limit // 1000} W")


if __name__ == "__main__":
    main()
