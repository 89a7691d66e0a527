import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline.client.partitioner import murmur2, partition_for

# Values printed by org.apache.kafka.common.utils.Utils.murmur2 of kafka-clients 4.1.1
# (the jar in our cache), the function the Java producer partitions with.
JAVA = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
    b"": 275646681,
    b"\xff\xfe\x80": -160726397,
}


@pytest.mark.parametrize(("data", "expected"), JAVA.items())
def test_matches_java_murmur2(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_partition_is_in_range_and_a_java_int(data: bytes, partitions: int) -> None:
    assert -(2**31) <= murmur2(data) < 2**31
    assert 0 <= partition_for(data, partitions) < partitions


def test_negative_hashes_use_java_to_positive_not_abs() -> None:
    # Java: (murmur2 & 0x7fffffff) % n; abs() would differ for negative hashes.
    assert partition_for(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7 != abs(-790332482) % 7


def test_rejects_zero_partitions() -> None:
    with pytest.raises(ValueError, match="positive"):
        partition_for(b"x", 0)
