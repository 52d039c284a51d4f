"""A stand-in for the parts of Hugging Face transformers that a TrainerCallback touches.

Not transformers: a few dozen lines that call callbacks the way transformers' Trainer does
(CallbackHandler.call_event(event, args, state, control, model=..., tokenizer=..., optimizer=...,
lr_scheduler=..., train_dataloader=..., eval_dataloader=...)), so the tests and the example can
prove zeusc's HFGlobalPowerLimitOptimizer wiring on machines without transformers. Put this
folder on sys.path only when the real package is absent.
"""
from __future__ import annotations

from dataclasses import dataclass, field

__version__ = "0.0-zeusc-stand-in"
IS_ZEUSC_STAND_IN = True


@dataclass
class TrainingArguments:
    output_dir: str = "out"
    num_train_epochs: int = 1
    max_steps: int = -1


@dataclass
class TrainerState:
    epoch: float = 0.0
    global_step: int = 0
    max_steps: int = 0
    log_history: list = field(default_factory=list)


@dataclass
class TrainerControl:
    should_training_stop: bool = False
    should_epoch_stop: bool = False


class TrainerCallback:
    """transformers.TrainerCallback: every event does nothing unless overridden."""

    def on_init_end(self, args, state, control, **kwargs):
        pass

    def on_train_begin(self, args, state, control, **kwargs):
        pass

    def on_train_end(self, args, state, control, **kwargs):
        pass

    def on_epoch_begin(self, args, state, control, **kwargs):
        pass

    def on_epoch_end(self, args, state, control, **kwargs):
        pass

    def on_step_begin(self, args, state, control, **kwargs):
        pass

    def on_substep_end(self, args, state, control, **kwargs):
        pass

    def on_step_end(self, args, state, control, **kwargs):
        pass

    def on_evaluate(self, args, state, control, **kwargs):
        pass

    def on_log(self, args, state, control, **kwargs):
        pass

    def on_save(self, args, state, control, **kwargs):
        pass


class CallbackHandler(TrainerCallback):
    """Calls every callback's event with the Trainer's keyword arguments."""

    def __init__(self, callbacks, model):
        self.callbacks = []
        for cb in callbacks:
            if isinstance(cb, type):
                cb = cb()
            if not isinstance(cb, TrainerCallback):
                raise TypeError(f"{type(cb).__name__} is not a TrainerCallback")
            self.callbacks.append(cb)
        self.model = model
        self.events = []

    def call_event(self, event, args, state, control, **kwargs):
        self.events.append(event)
        for cb in self.callbacks:
            result = getattr(cb, event)(args, state, control, model=self.model, tokenizer=None, optimizer=None,
                                        lr_scheduler=None, train_dataloader=None, eval_dataloader=None, **kwargs)
            if result is not None:
                control = result
        return control


class Trainer:
    """Runs `model(batch)` for every batch of `train_dataset`, for args.num_train_epochs epochs,
    with the callback events of transformers' training loop."""

    def __init__(self, model=None, args=None, train_dataset=None, callbacks=None):
        self.model = model
        self.args = args or TrainingArguments()
        self.train_dataset = list(train_dataset or [])
        self.state = TrainerState()
        self.control = TrainerControl()
        self.callback_handler = CallbackHandler(callbacks or [], model)
        self.control = self.callback_handler.call_event("on_init_end", self.args, self.state, self.control)

    def add_callback(self, callback):
        self.callback_handler.callbacks.append(callback() if isinstance(callback, type) else callback)

    def train(self):
        h, a, s = self.callback_handler, self.args, self.state
        s.max_steps = len(self.train_dataset) * a.num_train_epochs
        self.control = h.call_event("on_train_begin", a, s, self.control)
        for epoch in range(a.num_train_epochs):
            self.control = h.call_event("on_epoch_begin", a, s, self.control)
            for i, batch in enumerate(self.train_dataset):
                self.control = h.call_event("on_step_begin", a, s, self.control)
                self.model(batch)
                s.global_step += 1
                s.epoch = epoch + (i + 1) / len(self.train_dataset)
                self.control = h.call_event("on_step_end", a, s, self.control)
                if self.control.should_training_stop or self.control.should_epoch_stop:
                    break
            self.control = h.call_event("on_epoch_end", a, s, self.control)
            if self.control.should_training_stop:
                break
        self.control = h.call_event("on_train_end", a, s, self.control)
        return s
