"""A training script that `zeus run` drives through zeusc.run.ZeusDataLoader (the ZEUS_* protocol).

    zeus run --batch-sizes 32,64,128,256,512 --default-bs 128 --target-metric 0.80 --max-epochs 40 \\
        --lr 0.2 --optimizer adam --recurrences 4 \\
        -- python3 examples/python/train_zeus_run.py --bs {bs} --lr {lr} --seed {seed} --epochs {epochs}

It learns a logistic-regression classifier of a synthetic, noisy two-class problem (four
features, two of them of small spread, 5% of the labels flipped, so accuracy tops out near 0.93): with PyTorch when it is
installed (torch.nn.Linear, SGD, a torch DataLoader under ZeusDataLoader), otherwise in plain
Python (the same model, the same updates, ZeusDataLoader's own batching). The target metric is
the validation accuracy.

The GPU: on the simulated GPU (ZEUS_GPU_BACKEND=sim, as `make demo` runs it) every training step
also runs bs/128 + 0.25 units of simulated work on GPU 0 and every evaluation step 0.5, so the
power limits ZeusDataLoader profiles in the first epoch change the step's simulated time and
energy (the simulated GPU follows its virtual clock, set here: a run takes a fraction of a second). On a
real GPU the PyTorch path does its work wherever the model lives (here: the CPU).

With the learning rate scaled by the square root of the batch size (``--optimizer adam``), small
batch sizes learn more per epoch but pay a fixed cost per step: the batch-size optimizer has a
real trade-off to find (64 is cheapest here, the default 128 is not).

Run by hand (outside zeus run) with ZEUS_TARGET_METRIC=0.8 and, optionally, ZEUS_LOG_DIR.
"""
from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time

from zeusc.device import Devices
from zeusc.run import ZeusCostThresholdExceededError, ZeusDataLoader

FEATURES = 4
# The class mostly depends on two features of small spread: gradient descent learns them slowly,
# so accuracy climbs over several epochs (more of them, and larger steps, at larger batch sizes).
SCALE = (1.0, 0.1, 0.1, 1.0)
TRUE_W = (0.3, 10.0, -8.0, 0.2)


def make_data(n: int, seed: int):
    rng = random.Random(seed)
    data = []
    for _ in range(n):
        x = [s * rng.gauss(0.0, 1.0) for s in SCALE]
        y = 1 if sum(w * v for w, v in zip(TRUE_W, x)) + 0.3 * rng.gauss(0.0, 1.0) > 0 else 0
        if rng.random() < 0.05:
            y = 1 - y
        data.append((x, y))
    return data


class PlainModel:
    """Logistic regression trained by mini-batch SGD, in plain Python."""

    def __init__(self, lr: float):
        self.w = [0.0] * FEATURES
        self.b = 0.0
        self.lr = lr

    def step(self, batch) -> None:
        gw = [0.0] * FEATURES
        gb = 0.0
        for x, y in batch:
            z = self.b + sum(w * v for w, v in zip(self.w, x))
            p = 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))
            d = p - y
            for i in range(FEATURES):
                gw[i] += d * x[i]
            gb += d
        k = self.lr / len(batch)
        self.w = [w - k * g for w, g in zip(self.w, gw)]
        self.b -= k * gb

    def correct(self, batch) -> int:
        return sum(1 for x, y in batch if (self.b + sum(w * v for w, v in zip(self.w, x)) > 0) == (y == 1))


def simulated_gpu():
    """(node, GPU index) of the simulated GPU 0, or None on real GPUs. The simulated GPU runs on
    its virtual clock whatever ZEUS_SIM_CLOCK says (zeus run's CLI defaults it to the wall clock,
    which would make every simulated step sleep)."""
    if os.environ.get("ZEUS_GPU_BACKEND") == "sim":
        os.environ["ZEUS_SIM_CLOCK"] = "virtual"  # before libzeus opens the process's GPUs
    dev = Devices.default()
    if dev.backend != "sim":
        return None
    node = dev.sim_node()
    return node, node.node_index(0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bs", type=int, required=True, help="batch size")
    ap.add_argument("--lr", type=float, default=0.05, help="learning rate")
    ap.add_argument("--seed", type=int, default=1, help="data and shuffling seed")
    ap.add_argument("--epochs", type=int, default=30, help="max epochs")
    ap.add_argument("--samples", type=int, default=8192, help="training samples")
    ap.add_argument("--eval-samples", type=int, default=2048, help="validation samples")
    args = ap.parse_args()

    train_set = make_data(args.samples, seed=1000 + args.seed)
    eval_set = make_data(args.eval_samples, seed=7)
    sim = simulated_gpu()
    train_units, eval_units = args.bs / 128 + 0.25, 0.5

    try:
        import torch
    except ImportError:
        torch = None

    if torch is not None:
        torch.manual_seed(args.seed)
        tx = torch.tensor([x for x, _ in train_set], dtype=torch.float32)
        ty = torch.tensor([[float(y)] for _, y in train_set])
        ex = torch.tensor([x for x, _ in eval_set], dtype=torch.float32)
        ey = torch.tensor([[float(y)] for _, y in eval_set])
        gen = torch.Generator().manual_seed(args.seed)
        train_loader = ZeusDataLoader(torch.utils.data.TensorDataset(tx, ty), batch_size=args.bs,
                                      max_epochs=args.epochs, shuffle=True, generator=gen)
        eval_loader = ZeusDataLoader(torch.utils.data.TensorDataset(ex, ey), batch_size=256)
        model = torch.nn.Linear(FEATURES, 1)
        torch.nn.init.zeros_(model.weight)
        torch.nn.init.zeros_(model.bias)
        opt = torch.optim.SGD(model.parameters(), lr=args.lr)
        loss_fn = torch.nn.BCEWithLogitsLoss()

        def train_step(batch):
            x, y = batch
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()

        def correct(batch):
            x, y = batch
            with torch.no_grad():
                return int(((model(x) > 0).float() == y).sum())
        flavour = "PyTorch"
    else:
        train_loader = ZeusDataLoader(train_set, batch_size=args.bs, max_epochs=args.epochs, shuffle=True,
                                      seed=args.seed)
        eval_loader = ZeusDataLoader(eval_set, batch_size=256)
        model = PlainModel(args.lr)
        train_step, correct = model.step, model.correct
        flavour = "plain Python"

    print(f"train_zeus_run: {flavour}, batch size {args.bs}, lr {args.lr:g}, {len(train_loader)} steps per epoch, "
          f"{'simulated GPU' if sim else 'real GPUs'}", flush=True)
    started = time.time()
    try:
        for epoch in train_loader.epochs():
            for batch in train_loader:
                train_step(batch)
                if sim:
                    sim[0].work(sim[1], train_units)
            right = 0
            for batch in eval_loader:
                right += correct(batch)
                if sim:
                    sim[0].work(sim[1], eval_units)
            accuracy = right / len(eval_set)
            train_loader.report_metric(accuracy, higher_is_better=True)
            info = train_loader.job.info()
            print(f"epoch {epoch + 1}: accuracy {accuracy:.4f} ({info['time_s']:.1f} s, {info['energy_j']:.0f} J so far, "
                  f"optimal power limit {info['optimal_power_limit_w']} W)", flush=True)
    except ZeusCostThresholdExceededError as e:
        print(f"train_zeus_run: stopped early: {e}", flush=True)
    info = train_loader.job.info()
    print(f"train_zeus_run: {'reached the target' if info['reached'] else 'stopped'} after {info['epochs']} epochs: "
          f"{info['time_s']:.1f} s, {info['energy_j']:.0f} J, cost {info['cost']:.0f} -> {info['train_json']} "
          f"({time.time() - started:.2f} s of wall time)", flush=True)
    train_loader.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
