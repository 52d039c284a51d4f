"""Optimizers (zeus.optimizer of the original): zeusc.optimizer.power_limit."""
