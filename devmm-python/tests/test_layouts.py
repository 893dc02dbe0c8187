"""Layout policies and resolved layouts."""

import copy
import pickle

import pytest

import devmm

F32 = devmm.DType.from_string("float32")


def test_dense_policies(cpu: devmm.Device) -> None:
    assert devmm.RowMajor()((2, 3, 4), F32, cpu).strides == (12, 4, 1)
    assert devmm.ColMajor()((2, 3, 4), F32, cpu).strides == (1, 2, 6)
    nhwc = devmm.Permuted([0, 2, 3, 1])
    assert nhwc((1, 3, 4, 5), "uint8", cpu).strides == (60, 1, 15, 3)
    assert nhwc.permutation == (0, 2, 3, 1)


def test_layouts_carry_their_policy_object(cpu: devmm.Device) -> None:
    for policy in (devmm.RowMajor(), devmm.ColMajor(), devmm.DeviceOptimal(), devmm.Permuted([1, 0])):
        assert policy((2, 2), F32, cpu).policy is policy


def test_aligned_pads_rows_and_base(cpu: devmm.Device) -> None:
    aligned = devmm.Aligned(devmm.RowMajor(), unit_stride_alignment=128, base_alignment=256)
    layout = aligned((4, 3), F32, "cpu")
    assert layout.strides == (32, 1)
    assert layout.required_nbytes == 512
    assert layout.base_alignment == 256
    assert isinstance(aligned.inner, devmm.RowMajor)
    assert repr(aligned) == "Aligned(RowMajor(), unit_stride_alignment=128, base_alignment=256)"


def test_device_optimal_depends_on_the_device() -> None:
    opt = devmm.DeviceOptimal()
    assert opt((2, 3), F32, "cpu").strides == (16, 1)
    assert opt((2, 3), F32, "cuda:0").strides == (32, 1)
    assert opt((2, 3), F32, "cuda:0").base_alignment == 256


def test_layout_fields(cpu: devmm.Device) -> None:
    layout = devmm.ColMajor()((2, 3), "int64", cpu)
    assert layout.shape == (2, 3)
    assert layout.permutation == (1, 0)
    assert (layout.itemsize, layout.numel, layout.required_nbytes) == (8, 6, 48)
    assert not layout.is_c_contiguous()
    assert devmm.RowMajor()((2, 3), "int64", cpu).is_c_contiguous()
    assert layout == devmm.ColMajor()((2, 3), "int64", cpu)
    assert layout != devmm.RowMajor()((2, 3), "int64", cpu)


@pytest.mark.parametrize(("alignments", "match"), [((1, 48), "power of two"), ((1, 0), "power of two"), ((0, 1), "positive byte count")])
def test_base_alignments_must_be_powers_of_two_and_unit_strides_positive(alignments: tuple[int, int], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        devmm.Aligned(devmm.RowMajor(), *alignments)


def test_bad_layouts_raise_value_error(cpu: devmm.Device) -> None:
    with pytest.raises(ValueError, match="not a permutation"):
        devmm.Permuted([0, 0])((2, 2), F32, cpu)
    with pytest.raises(ValueError, match="overflows"):
        devmm.RowMajor()((1 << 62, 1 << 62), F32, cpu)
    with pytest.raises(ValueError, match="shape must list integers from 0"):
        devmm.RowMajor()((-1,), F32, cpu)
    with pytest.raises(ValueError, match="shape must list integers from 0"):
        devmm.empty((2, 2**64), F32)
    with pytest.raises(ValueError, match="strides must list integers from 0"):
        devmm.Layout((2,), (-1,), F32)


def test_stateless_policies_are_singletons() -> None:
    assert devmm.RowMajor() is devmm.RowMajor()
    assert devmm.ColMajor() is devmm.ColMajor()
    assert devmm.DeviceOptimal() is devmm.DeviceOptimal()
    assert devmm.RowMajor() is not devmm.ColMajor()
    assert devmm.Permuted([1, 0]) is not devmm.Permuted([1, 0])


def test_layout_is_constructible_from_its_fields(cpu: devmm.Device) -> None:
    hand = devmm.Layout((2, 3), (3, 1), F32)
    resolved = devmm.RowMajor()((2, 3), F32, cpu)
    assert (hand.shape, hand.strides, hand.required_nbytes, hand.base_alignment) == ((2, 3), (3, 1), 24, 4)
    assert hand.policy is None and resolved.policy is not None
    # Value equality and hashing: provenance aside, the same memory.
    assert hand == resolved and hash(hand) == hash(resolved)
    assert len({hand, resolved, devmm.ColMajor()((2, 3), F32, cpu)}) == 2
    padded = devmm.Layout((2, 3), (16, 1), F32, base_alignment=64, policy=devmm.RowMajor())
    assert (padded.required_nbytes, padded.base_alignment) == (128, 64)
    assert padded.policy is devmm.RowMajor()


@pytest.mark.parametrize(
    ("shape", "strides", "match"),
    [((2, 3), (2, 1), "overlaps"), ((2, 3), (0, 1), "positive"), ((2, 3), (1,), "one stride per dimension")],
)
def test_bad_hand_built_layouts_are_value_errors(shape: tuple[int, ...], strides: tuple[int, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        devmm.Layout(shape, strides, F32)


def test_layout_validate_checks_the_shape_and_itemsize_it_is_applied_to(cpu: devmm.Device) -> None:
    layout = devmm.RowMajor()((2, 3), F32, cpu)
    layout.validate()
    layout.validate((2, 3), 4)
    with pytest.raises(ValueError, match=r"for shape \[2, 3\], not \[3, 2\]"):
        layout.validate((3, 2), 4)
    with pytest.raises(ValueError, match="4-byte elements, not 8-byte"):
        layout.validate((2, 3), 8)


def test_layout_is_contiguous(cpu: devmm.Device) -> None:
    assert devmm.RowMajor()((2, 3), F32, cpu).is_contiguous
    assert devmm.ColMajor()((2, 3), F32, cpu).is_contiguous
    assert devmm.Permuted((1, 0))((2, 3), F32, cpu).is_contiguous
    assert not devmm.Aligned(devmm.RowMajor(), 64, 64)((2, 3), F32, cpu).is_contiguous
    assert not devmm.Layout((2, 3), (4, 1), F32).is_contiguous
    assert devmm.Layout((0, 3), (4, 1), F32).is_contiguous


def test_policies_expose_their_parameters_and_compare_by_value() -> None:
    assert devmm.Permuted((2, 0, 1)).permutation == (2, 0, 1)
    assert devmm.Permuted([1, 0]) == devmm.Permuted((1, 0))
    assert hash(devmm.Permuted([1, 0])) == hash(devmm.Permuted((1, 0)))
    assert devmm.Permuted((1, 0)) != devmm.Permuted((0, 1))
    a = devmm.Aligned(devmm.RowMajor(), unit_stride_alignment=128, base_alignment=256)
    assert (a.inner, a.unit_stride_alignment, a.base_alignment) == (devmm.RowMajor(), 128, 256)
    assert a == devmm.Aligned(devmm.RowMajor(), 128, 256)
    assert hash(a) == hash(devmm.Aligned(devmm.RowMajor(), 128, 256))
    assert a != devmm.Aligned(devmm.RowMajor(), 64, 256)
    assert a != devmm.Aligned(devmm.ColMajor(), 128, 256)
    assert devmm.Aligned(devmm.Permuted((1, 0)), 8, 8) == devmm.Aligned(devmm.Permuted((1, 0)), 8, 8)
    assert devmm.RowMajor() == devmm.RowMajor() and devmm.RowMajor() != devmm.ColMajor()


@pytest.mark.parametrize("bad", [(0, 0), (0, 2), (1,), (1, 2, 3)])
def test_permuted_rejects_a_bad_permutation_when_constructed(bad: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="not a permutation"):
        devmm.Permuted(bad)


def test_aligned_accepts_what_the_seed_rule_accepts(cpu: devmm.Device) -> None:
    # Rows pad to the least multiple of the item size and the unit stride
    # alignment: any positive alignment, not only powers of two.
    assert devmm.Aligned(devmm.RowMajor(), 48, 64)((2, 3), F32, cpu).strides == (12, 1)
    assert devmm.Aligned(devmm.RowMajor(), 12, 16)((2, 5), "int64", cpu).strides == (6, 1)
    # Finer than one element: rows pad to whole elements only.
    assert devmm.Aligned(devmm.RowMajor(), 4, 1)((2, 3), "float64", cpu).strides == (3, 1)
    # Nested: rows meet both alignments (the least common multiple).
    nested = devmm.Aligned(devmm.Aligned(devmm.RowMajor(), 48, 64), 32, 64)
    assert nested((2, 3), "uint8", cpu).strides == (96, 1)
    t = devmm.empty((2, 3), "float32", layout=devmm.Aligned(devmm.RowMajor(), 48, 64))
    assert t.strides == (12, 1) and t.data_ptr % 64 == 0
    with pytest.raises(ValueError, match="positive byte count"):
        devmm.Aligned(devmm.RowMajor(), 0, 64)
    with pytest.raises(ValueError, match="base_alignment must be a power of two"):
        devmm.Aligned(devmm.RowMajor(), 64, 48)


@pytest.mark.parametrize(
    "policy_class, spelling",
    [(devmm.RowMajor, "RowMajor()"), (devmm.ColMajor, "ColMajor()"), (devmm.DeviceOptimal, "DeviceOptimal()")],
)
def test_stateless_policies_spell_pickle_and_copy_as_their_one_instance(
    policy_class: type[devmm.LayoutPolicy], spelling: str
) -> None:
    one = policy_class()
    assert repr(one) == spelling
    assert pickle.loads(pickle.dumps(one)) is one
    assert copy.copy(one) is one and copy.deepcopy(one) is one


def test_policies_with_parameters_pickle_their_parameters() -> None:
    for policy in (
        devmm.Permuted([2, 0, 1]),
        devmm.Aligned(devmm.ColMajor(), unit_stride_alignment=96, base_alignment=128),
    ):
        again = pickle.loads(pickle.dumps(policy))
        assert type(again) is type(policy) and again == policy and repr(again) == repr(policy)
    assert repr(devmm.Permuted([2, 0, 1])) == "Permuted([2, 0, 1])"
    assert devmm.Permuted([1, 0]) != devmm.RowMajor() and devmm.Permuted([1, 0]) != (1, 0)
