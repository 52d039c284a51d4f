"""One training session of a recurring job on one "node", asking `zeus bso-server` for its batch
size through zeusc's BatchSizeOptimizer (the original's client API, standard library only).

    zeus bso-server --port 7788 --database sqlite:///tmp/bso.db &
    python3 examples/python/bso_node.py --server http://127.0.0.1:7788 --node a
    python3 examples/python/bso_node.py --server http://127.0.0.1:7788 --node b   # another machine

Each run is one recurrence: it registers the job (the same job id and specification on every
node: 201 the first time, 200 after), gets a batch size, "trains" (a toy model whose accuracy
climbs faster per epoch at smaller batch sizes, while each epoch takes longer), and reports each
epoch's time, energy and accuracy until the server says stop. Energy is measured by ZeusMonitor
on GPU 0: under ZEUS_GPU_BACKEND=sim (as `make demo` runs it) each epoch is simulated work on
the simulated GPU's virtual clock; on a real GPU this toy does no GPU work.
"""
from __future__ import annotations

import argparse
import os

from zeusc.device import Devices
from zeusc.monitor import ZeusMonitor
from zeusc.optimizer.batch_size.client import BatchSizeOptimizer
from zeusc.optimizer.batch_size.common import JobSpec
from zeusc.optimizer.batch_size.exceptions import ZeusBSOTrainFailError


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True)
    ap.add_argument("--node", default="a")
    ap.add_argument("--job-id", default="demo-mnist")
    args = ap.parse_args()
    job = JobSpec(job_id=args.job_id, job_id_prefix="demo", batch_sizes=[32, 64, 128, 256, 512],
                  default_batch_size=128, target_metric=0.9, max_epochs=12, beta_knob=None, mab_seed=1)
    if os.environ.get("ZEUS_GPU_BACKEND") == "sim":
        os.environ["ZEUS_SIM_CLOCK"] = "virtual"  # simulated epochs take no wall time
    dev = Devices.default()
    node = dev.sim_node() if dev.backend == "sim" else None
    monitor = ZeusMonitor(gpu_indices=[0])
    bso = BatchSizeOptimizer(monitor, args.server, job)
    bs = bso.get_batch_size()
    bso.on_train_begin()
    acc = 0.5
    for epoch in range(1, 100):
        if node is not None:  # an epoch: more steps (fixed costs) at smaller batch sizes
            node.work(node.node_index(0), 20 + 2560 / bs)
        acc += (1 - acc) * (0.6 if bs <= 64 else 0.45 if bs <= 256 else 0.1)
        try:
            bso.on_evaluate(acc)
        except ZeusBSOTrainFailError as e:
            print(f"node {args.node}: trial {bso.trial_number} batch size {bs}: failed ({e})")
            return 0
        if bso.training_finished:
            break
    print(f"node {args.node}: trial {bso.trial_number} batch size {bs}: reached {acc:.3f} after {epoch} epochs, "
          f"{bso.running_time:.3f} s, {bso.consumed_energy:.2f} J")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
