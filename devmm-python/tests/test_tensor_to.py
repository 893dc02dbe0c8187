"""`Tensor.to`: explicit copies (DLPack exports stay zero-copy), checked
against NumPy on the CPU and over the fake CUDA and HIP drivers, for padded
`Aligned` layouts and permuted ones."""

import os
from collections.abc import Callable
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import devmm


def filled(shape: tuple[int, ...], dtype: str, layout: devmm.LayoutPolicy) -> tuple[devmm.Tensor, np.ndarray]:
    t = devmm.empty(shape, dtype, layout=layout, device="cpu")
    reference = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) * 3 + 1
    np.asarray(t)[...] = reference
    return t, reference


@pytest.mark.parametrize(
    "target",
    [None, devmm.RowMajor(), devmm.ColMajor(), devmm.Permuted([1, 0]), devmm.Aligned(devmm.ColMajor(), 32, 64)],
    ids=repr,
)
def test_a_padded_source_copies_into_any_layout(target: devmm.LayoutPolicy | None) -> None:
    src, reference = filled((3, 5), "uint32", devmm.Aligned(devmm.RowMajor(), 64, 64))
    assert src.strides == (16, 1)
    copy = src.to("cpu", layout=target)
    expected = src.layout if target is None else target((3, 5), "uint32", copy.device)
    assert copy.strides == expected.strides
    assert copy.data_ptr != src.data_ptr
    np.testing.assert_array_equal(np.asarray(copy), reference)


@pytest.mark.parametrize("target", [None, devmm.RowMajor(), devmm.Permuted([1, 2, 0])], ids=repr)
def test_a_permuted_source_copies_element_by_element(target: devmm.LayoutPolicy | None) -> None:
    src, reference = filled((2, 3, 4), "int16", devmm.Permuted([2, 0, 1]))
    assert not np.asarray(src).flags.c_contiguous
    copy = src.to(devmm.Device.from_string("cpu"), layout=target)
    np.testing.assert_array_equal(np.asarray(copy), reference)
    if target is None:
        assert copy.strides == src.strides and copy.layout.policy is src.layout.policy


def test_a_resolved_layout_is_used_as_given() -> None:
    src, reference = filled((4, 3), "float64", devmm.RowMajor())
    fortran = devmm.ColMajor()((4, 3), "float64", src.device)
    copy = src.to("cpu", layout=fortran)
    assert copy.strides == (1, 4)
    np.testing.assert_array_equal(np.asarray(copy), reference)
    with pytest.raises(ValueError, match="resolve a layout for this shape"):
        src.to("cpu", layout=devmm.ColMajor()((3, 4), "float64", src.device))


class PaddedColumns(devmm.LayoutPolicy):
    """A policy written in Python: column-major, columns padded to 4 elements."""

    @property
    def base_alignment(self) -> int:
        return 16

    @property
    def unit_stride_alignment(self) -> int:
        return 1

    def __call__(self, shape: tuple[int, ...], dtype: Any, device: Any) -> devmm.Layout:
        return devmm.Layout(shape, (1, 4), dtype, base_alignment=16, policy=self)


def test_a_python_policy_lays_the_copy_out() -> None:
    src, reference = filled((3, 2), "float32", devmm.RowMajor())
    policy = PaddedColumns()
    copy = src.to("cpu", layout=policy)
    assert (copy.strides, copy.layout.policy) == ((1, 4), policy)
    np.testing.assert_array_equal(np.asarray(copy), reference)


def test_a_read_only_import_gives_a_writable_copy() -> None:
    producer = np.arange(6, dtype=np.int32).reshape(2, 3)
    producer.flags.writeable = False
    imported = devmm.from_dlpack(producer)
    assert imported.read_only
    copy = imported.to("cpu")
    assert not copy.read_only
    np.asarray(copy)[0, 0] = 99
    assert np.asarray(copy).tolist() == [[99, 1, 2], [3, 4, 5]]
    assert producer[0, 0] == 0


def test_the_copy_comes_from_the_current_resource(stats: devmm.StatisticsAdaptor, stream: devmm.Stream) -> None:
    src, reference = filled((8,), "uint8", devmm.RowMajor())
    with devmm.using_memory_resource(stats):
        copy = src.to("cpu", stream=stream)
    assert copy.buffer.mr is stats and stats.current_bytes == 8
    assert copy.buffer.stream is stream
    np.testing.assert_array_equal(np.asarray(copy), reference)
    del copy
    assert stats.current_bytes == 0


def test_zero_size_and_freed_sources() -> None:
    assert devmm.empty((0, 5), "float32").to("cpu").shape == (0, 5)
    src, _ = filled((2,), "float32", devmm.RowMajor())
    src.free()
    with pytest.raises(ValueError, match="freed"):
        src.to("cpu")


def test_a_device_devmm_cannot_copy_to_names_both() -> None:
    src, _ = filled((2,), "float32", devmm.RowMajor())
    pinned = devmm.Device(devmm.DeviceType.CUDA_HOST, 0)
    with pytest.raises(ValueError, match=r"^cannot copy a tensor from cpu:0 to cuda_host:0: "):
        src.to(pinned)
    with pytest.raises(TypeError):
        src.to("cpu", layout="RowMajor")


SCRIPT = textwrap.dedent(
    """
    import numpy as np
    import devmm

    gpu = devmm.Device.from_string("{device}:0")
    cpu = devmm.Device.from_string("cpu")

    def filled(shape, dtype, layout):
        t = devmm.empty(shape, dtype, layout=layout, device=cpu)
        reference = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) * 3 + 1
        np.asarray(t)[...] = reference
        return t, reference

    # Padded rows: host to device row by row, back element by element.
    padded, reference = filled((3, 5), "uint32", devmm.Aligned(devmm.RowMajor(), 64, 64))
    on_gpu = padded.to(gpu)
    assert on_gpu.device == gpu and on_gpu.strides == (16, 1)
    raw = on_gpu.buffer.copy_to_host(nbytes=on_gpu.buffer.nbytes)
    start = on_gpu.byte_offset // 4
    device_view = np.frombuffer(raw, dtype=np.uint32)[start:start + 48].reshape(3, 16)[:, :5]
    np.testing.assert_array_equal(device_view, reference)
    back = on_gpu.to(cpu, layout=devmm.ColMajor())
    assert back.strides == (1, 3)
    np.testing.assert_array_equal(np.asarray(back), reference)

    # Permuted: transposed on the way up, re-laid out within the device.
    permuted, reference = filled((2, 3, 4), "int16", devmm.Permuted([2, 0, 1]))
    dense = permuted.to(gpu, layout=devmm.RowMajor())
    assert dense.strides == (12, 4, 1)
    within = dense.to(gpu, layout=devmm.Aligned(devmm.ColMajor(), 128, 256))
    assert within.device == gpu and within.data_ptr % 256 == 0
    home = within.to_read_only().to(cpu)
    assert home.strides == within.strides and not home.read_only
    np.testing.assert_array_equal(np.asarray(home), reference)

    # Streams: a stream of the GPU side orders it; the copy is allocated on it.
    rt = devmm.runtime_for(gpu)
    stream = rt.create_stream(gpu)
    copy = on_gpu.to(gpu, stream=stream)
    assert copy.buffer.stream is stream
    np.testing.assert_array_equal(np.asarray(copy.to(cpu, stream=stream)), np.asarray(back))
    try:
        padded.to(gpu, stream=devmm.runtime_for(cpu).default_stream(cpu))
    except ValueError as err:
        assert "pass a stream of {device}:0" in str(err), err
    else:
        raise AssertionError("a host stream cannot order a copy to the GPU")

    # Pairs devmm does not copy between, named.
    for other in ["{device}:1", "{other}:0"]:
        try:
            on_gpu.to(other)
        except ValueError as err:
            message = "cannot copy a tensor from {device}:0 to " + other
            assert str(err).startswith(message), err
            assert str(err).endswith("copy through the host: .to(cpu:0).to(" + other + ")"), err
        else:
            raise AssertionError("copied to " + other)

    # The export's refusal points at the copy.
    try:
        padded.__dlpack__(dl_device=({code}, 0))
    except BufferError as err:
        assert 'call Tensor.to("{device}:0") for a copy on {device}:0' in str(err), err
    else:
        raise AssertionError("a cross-device export must be refused")
    print("ok")
    """
)

PLATFORMS = {
    "cuda": dict(env="DEVMM_TEST_FAKE_CUDART", path_var="DEVMM_CUDART_PATH", device="cuda", other="rocm", code=2),
    "rocm": dict(env="DEVMM_TEST_FAKE_HIP", path_var="DEVMM_HIP_PATH", device="rocm", other="cuda", code=10),
}


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_copies_over_the_fake_driver(platform: str, fake_library: Callable[[str], str]) -> None:
    p = PLATFORMS[platform]
    env = dict(os.environ, **{str(p["path_var"]): fake_library(str(p["env"]))})
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(**p)], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
