"""Perseus: the pipeline frequency optimizer (zeus.optimizer.pipeline_frequency of the original)."""
from .optimizer import PipelineFrequencyOptimizer, RoundStats

__all__ = ["PipelineFrequencyOptimizer", "RoundStats"]
