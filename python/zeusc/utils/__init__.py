"""Utilities of the original API: zeusc.utils.metric (zeus_cost), zeusc.utils.framework."""
