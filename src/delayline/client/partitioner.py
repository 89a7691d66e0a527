"""Java-compatible key partitioning.

Kafka's Java producer places a keyed record in partition
``toPositive(murmur2(key)) % partitions``. delayline does the same so that a
schedule and its cancel share a partition whichever client wrote them, and so
compaction sees them as one key.
"""

from __future__ import annotations

from delayline.errors import ConfigError

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Return Kafka's 32-bit murmur2 hash of ``data`` as a signed Java int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    blocks = length // 4
    for i in range(blocks):
        j = i * 4
        k = data[j] | data[j + 1] << 8 | data[j + 2] << 16 | data[j + 3] << 24
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    base = blocks * 4
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: bytes, partitions: int) -> int:
    """Partition of ``key`` among ``partitions``, as the Java default partitioner picks it."""
    if partitions <= 0:
        raise ConfigError(f"partition count must be positive, got {partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % partitions
