"""Resource samplers: NVML for GPUs (degrades to "unavailable" without a driver); task CPU and memory come
from the runtimes."""
