"""Layout policies and resolved layouts."""

import copy
import ctypes
import dataclasses
import gc
import pickle
import weakref
from typing import Any

import pytest

import devmm

F32 = devmm.DType.from_string("float32")
PROTOCOLS = range(pickle.HIGHEST_PROTOCOL + 1)


@dataclasses.dataclass(frozen=True)
class Tiles(devmm.LayoutPolicy):
    """A Python policy at module level, so pickle can find its class."""

    order: tuple[int, ...] = (1, 0)

    @property
    def base_alignment(self) -> int:
        return 16

    @property
    def unit_stride_alignment(self) -> int:
        return 1

    def __call__(self, shape: tuple[int, ...], dtype: Any, device: Any) -> devmm.Layout:
        return devmm.Permuted(self.order)(shape, dtype, device)


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
    assert repr(aligned) == "Aligned(inner=RowMajor(), unit_stride_alignment=128, base_alignment=256)"


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
    with pytest.raises(ValueError, match="shape extents must be non-negative ints from 0"):
        devmm.RowMajor()((-1,), F32, cpu)
    with pytest.raises(ValueError, match="shape extents must be non-negative ints from 0"):
        devmm.empty((2, 2**64), F32)
    with pytest.raises(ValueError, match="strides must list non-negative ints from 0"):
        devmm.Layout((2,), (-1,), F32)



def test_entries_that_are_no_integers_are_value_errors(cpu: devmm.Device) -> None:
    # As the seed checks extents, strides and permutations: a value error
    # naming the argument, whichever way the layout is made or checked.
    layout = devmm.RowMajor()((2, 3), F32, cpu)
    for make, named in (
        (lambda: devmm.RowMajor()((2.0, 3), F32, cpu), "shape"),
        (lambda: devmm.DeviceOptimal()(("2", 3), F32, cpu), "shape"),
        (lambda: layout.validate((2, 3.0), 4), "shape"),
        (lambda: devmm.Layout((2, None), (3, 1), F32), "shape"),
        (lambda: devmm.Layout((2, 3), (3, 1.0), F32), "strides"),
        (lambda: devmm.Permuted("ab"), "permutation"),
        (lambda: devmm.Permuted((1, 0.5)), "permutation"),
    ):
        with pytest.raises(ValueError, match=f"^{named} (extents must be|must list) non-negative ints from 0"):
            make()
    # validate's item size is checked as the seed checks it: a positive int.
    for itemsize in (4.0, "4", -4, 0):
        with pytest.raises(ValueError, match=f"^itemsize must be a positive integer from 1 to .*, not {itemsize!r}$") as e:
            layout.validate((2, 3), itemsize)  # type: ignore[arg-type]
        # The conversion's TypeError, for a value that is no int, is kept as the cause.
        assert isinstance(e.value.__cause__, TypeError) == isinstance(itemsize, (float, str))
    with pytest.raises(ValueError, match="^strides must list non-negative ints from 0") as e:
        devmm.Layout((2, 3), (3, 1.0), F32)
    assert isinstance(e.value.__cause__, TypeError)
    with pytest.raises(ValueError, match="not 8-byte ones"):
        layout.validate((2, 3), 8)
    # A shape that is not a sequence at all stays a TypeError (the seed's tuple(shape)).
    with pytest.raises(TypeError):
        devmm.RowMajor()(2.5, F32, cpu)  # type: ignore[arg-type]


def test_stateless_policies_are_singletons() -> None:
    assert devmm.RowMajor() is devmm.RowMajor()
    assert devmm.ColMajor() is devmm.ColMajor()
    assert devmm.DeviceOptimal() is devmm.DeviceOptimal()
    assert devmm.RowMajor() is not devmm.ColMajor()
    assert devmm.Permuted([1, 0]) is not devmm.Permuted([1, 0])


def test_layout_is_constructible_from_its_fields(cpu: devmm.Device) -> None:
    hand = devmm.Layout((2, 3), (3, 1), F32)
    resolved = devmm.RowMajor()((2, 3), F32, cpu)
    assert (hand.shape, hand.strides, hand.required_nbytes, hand.base_alignment) == ((2, 3), (3, 1), 24, 1)
    assert hand.policy is None and resolved.policy is not None
    # Value equality and hashing over every field, the policy included (as
    # the seed's frozen dataclass compares them).
    assert hand != resolved
    assert devmm.Layout((2, 3), (3, 1), F32, policy=devmm.RowMajor()) == resolved
    assert hash(devmm.Layout((2, 3), (3, 1), F32, policy=devmm.RowMajor())) == hash(resolved)
    assert len({hand, resolved, devmm.RowMajor()((2, 3), F32, cpu), devmm.ColMajor()((2, 3), F32, cpu)}) == 3
    # The same memory from two policies: different provenance, unequal layouts.
    assert devmm.RowMajor()((3,), F32, cpu) != devmm.ColMajor()((3,), F32, cpu)
    assert devmm.Permuted((1, 0))((2, 3), F32, cpu) == devmm.Permuted([1, 0])((2, 3), F32, cpu)
    padded = devmm.Layout((2, 3), (16, 1), F32, base_alignment=64, policy=devmm.RowMajor())
    assert (padded.required_nbytes, padded.base_alignment) == (128, 64)
    assert padded.policy is devmm.RowMajor()


def test_layouts_pickle_and_copy_with_their_policy_in_every_protocol(cpu: devmm.Device) -> None:
    for layout in (
        devmm.Layout((2, 3), (4, 1), F32, base_alignment=16),
        devmm.RowMajor()((2, 3), F32, cpu),
        devmm.Aligned(devmm.Permuted((1, 0)), 64, 128)((3, 5), F32, cpu),
        devmm.Aligned(Tiles(), 8, 16)((3, 2), "uint8", cpu),
    ):
        for again in [pickle.loads(pickle.dumps(layout, p)) for p in PROTOCOLS] + [
            copy.copy(layout),
            copy.deepcopy(layout),
        ]:
            assert type(again) is devmm.Layout and again == layout and repr(again) == repr(layout)
            assert (again.strides, again.required_nbytes, again.base_alignment) == (
                layout.strides,
                layout.required_nbytes,
                layout.base_alignment,
            )


@pytest.mark.parametrize(
    ("shape", "strides", "match"),
    [
        ((2, 3), (2, 1), "overlaps"),
        # Each stride steps past the span of all inner ones: element (0, 0, 1)
        # and element (1, 1, 0) are both 3 elements in.
        ((2, 2, 2), (1, 2, 3), "stride 3 of dimension 2 overlaps the 4 elements"),
        ((2, 3), (0, 1), "positive"),
        ((2, 3), (1,), "one stride per dimension"),
    ],
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
    # Nested: the order comes from the inner policy, the alignments are the
    # outermost wrapper's own (the seed's rule), so they stay its declared bounds.
    nested = devmm.Aligned(devmm.Aligned(devmm.ColMajor(), 48, 512), 32, 64)
    assert nested((3, 2), "uint8", cpu).strides == (1, 32)
    assert nested((3, 2), "uint8", cpu).base_alignment == 64
    assert devmm.Aligned(devmm.DeviceOptimal(), 64, 64)((2, 3), F32, "cuda:0").base_alignment == 64
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
    for protocol in PROTOCOLS:
        assert pickle.loads(pickle.dumps(one, protocol)) is one
    assert copy.copy(one) is one and copy.deepcopy(one) is one


def test_policies_with_parameters_pickle_their_parameters() -> None:
    for policy in (
        devmm.Permuted([2, 0, 1]),
        devmm.Aligned(devmm.ColMajor(), unit_stride_alignment=96, base_alignment=128),
    ):
        for again in [pickle.loads(pickle.dumps(policy, p)) for p in PROTOCOLS] + [
            copy.copy(policy),
            copy.deepcopy(policy),
        ]:
            assert type(again) is type(policy) and again == policy and repr(again) == repr(policy)
    assert repr(devmm.Permuted([2, 0, 1])) == "Permuted(permutation=(2, 0, 1))"
    assert devmm.Permuted([1, 0]) != devmm.RowMajor() and devmm.Permuted([1, 0]) != (1, 0)


def test_aligned_defaults_to_gpu_rows_and_base(cpu: devmm.Device) -> None:
    # The seed's Aligned(inner, unit_stride_alignment=128, base_alignment=256).
    aligned = devmm.Aligned(devmm.RowMajor())
    assert (aligned.unit_stride_alignment, aligned.base_alignment) == (128, 256)
    layout = aligned((4, 3), F32, cpu)
    assert (layout.strides, layout.required_nbytes, layout.base_alignment) == ((32, 1), 512, 256)
    assert devmm.Aligned(devmm.ColMajor(), base_alignment=64) == devmm.Aligned(devmm.ColMajor(), 128, 64)


POLICIES = [
    (devmm.RowMajor(), 1, 1),
    (devmm.ColMajor(), 1, 1),
    (devmm.Permuted((2, 0, 1)), 1, 1),
    (devmm.DeviceOptimal(), 256, 128),
    (devmm.Aligned(devmm.ColMajor()), 256, 128),
    (devmm.Aligned(devmm.DeviceOptimal(), 48, 16), 16, 48),
]


@pytest.mark.parametrize(("policy", "base", "unit"), POLICIES, ids=repr)
def test_every_policy_declares_its_alignment_bounds(policy: devmm.LayoutPolicy, base: int, unit: int) -> None:
    assert (policy.base_alignment, policy.unit_stride_alignment) == (base, unit)
    # Declared upper bounds: no layout the policy resolves asks more.
    for device in ("cpu", "cuda:0", "cuda_host:0", "rocm:1", "cuda_managed:0"):
        for dtype in ("uint8", "float32", "float64", "complex128"):
            layout = policy((2, 3, 5), dtype, device)
            assert layout.policy is policy
            assert layout.base_alignment <= policy.base_alignment
            assert layout.required_nbytes % layout.base_alignment == 0


def test_dense_layouts_ask_no_base_alignment_yet_empty_aligns_elements(cpu: devmm.Device) -> None:
    # The seed's dense policies resolve a base alignment of 1; empty still
    # places every element on its natural boundary, even from a resource that
    # hands out odd addresses.
    assert devmm.RowMajor()((2, 3), "float64", cpu).base_alignment == 1
    assert devmm.ColMajor()((2, 3), "complex128", cpu).base_alignment == 1

    class OddHeap(devmm.DeviceMemoryResource):
        def __init__(self) -> None:
            super().__init__()
            self.blocks: dict[int, Any] = {}

        def allocate(self, nbytes: int, stream: Any = None) -> int:
            block = (ctypes.c_char * (nbytes + 32))()
            ptr = ((ctypes.addressof(block) + 15) & ~15) + 1
            self.blocks[ptr] = block
            return ptr

        def deallocate(self, ptr: int, nbytes: int, stream: Any = None) -> None:
            del self.blocks[ptr]

    heap = OddHeap()
    t = devmm.empty((3,), "float64", layout=devmm.RowMajor(), mr=heap)
    assert t.layout.base_alignment == 1
    assert t.data_ptr % 8 == 0 and t.buffer.ptr % 2 == 1 and t.byte_offset == 7
    t.buffer.free()


def test_a_python_subclass_of_layout_policy_lays_out_empty(cpu: devmm.Device) -> None:
    @dataclasses.dataclass(frozen=True)
    class Reversed(devmm.LayoutPolicy):
        """Column-major rows padded to `pad` elements, on a 64-byte base."""

        pad: int = 4

        @property
        def base_alignment(self) -> int:
            return 64

        @property
        def unit_stride_alignment(self) -> int:
            return 1

        def __call__(self, shape: tuple[int, ...], dtype: Any, device: Any) -> devmm.Layout:
            rows, cols = shape
            return devmm.Layout(shape, (1, self.pad), dtype, base_alignment=64, policy=self)

    policy = Reversed(pad=5)
    assert isinstance(policy, devmm.LayoutPolicy) and policy.base_alignment == 64
    assert policy((3, 2), F32, cpu).strides == (1, 5)
    t = devmm.empty((3, 2), "float32", layout=policy)
    assert (t.strides, t.layout.policy, t.data_ptr % 64) == ((1, 5), policy, 0)
    assert t.layout.required_nbytes == 64
    like = devmm.empty_like(t, layout=policy)
    assert like.strides == (1, 5) and like.layout.policy is policy
    with pytest.raises(ValueError, match="overlaps"):
        devmm.empty((3, 2), "float32", layout=Reversed(pad=2))


def test_a_python_policy_must_return_a_layout_for_the_shape() -> None:
    class Wrong(devmm.LayoutPolicy):
        def __init__(self, answer: Any) -> None:
            self.answer = answer

        base_alignment = 1
        unit_stride_alignment = 1

        def __call__(self, shape: tuple[int, ...], dtype: Any, device: Any) -> Any:
            return self.answer

    with pytest.raises(TypeError, match="the layout policy Wrong returned int, not a devmm.Layout"):
        devmm.empty((2,), "float32", layout=Wrong(3))
    with pytest.raises(ValueError, match=r"the layout is for shape \[4\], not \[2\]"):
        devmm.empty((2,), "float32", layout=Wrong(devmm.Layout((4,), (1,), "float32")))


def test_layout_policy_is_abstract() -> None:
    with pytest.raises(TypeError, match="abstract class LayoutPolicy with abstract methods"):
        devmm.LayoutPolicy()

    class NoCall(devmm.LayoutPolicy):
        base_alignment = 1
        unit_stride_alignment = 1

    with pytest.raises(TypeError, match="abstract class NoCall with abstract methods __call__"):
        NoCall()
    for shipped in (devmm.RowMajor(), devmm.Permuted((0,)), devmm.Aligned(devmm.RowMajor()), devmm.DeviceOptimal()):
        assert isinstance(shipped, devmm.LayoutPolicy)


def test_policies_are_frozen_dataclasses(cpu: devmm.Device) -> None:
    aligned = devmm.Aligned(devmm.ColMajor(), 64, 128)
    for policy in (devmm.RowMajor(), devmm.ColMajor(), devmm.DeviceOptimal(), devmm.Permuted((1, 0)), aligned):
        assert dataclasses.is_dataclass(policy)
        with pytest.raises(dataclasses.FrozenInstanceError):
            policy.base_alignment = 8  # type: ignore[misc]
    assert [f.name for f in dataclasses.fields(devmm.Aligned)] == ["inner", "unit_stride_alignment", "base_alignment"]
    assert [f.default for f in dataclasses.fields(aligned)][1:] == [128, 256]
    assert [f.name for f in dataclasses.fields(devmm.Permuted((1, 0)))] == ["permutation"]
    assert dataclasses.fields(devmm.RowMajor()) == ()
    wider = dataclasses.replace(aligned, base_alignment=512)
    assert wider == devmm.Aligned(devmm.ColMajor(), 64, 512) and type(wider) is devmm.Aligned
    assert wider((2, 3), F32, cpu).base_alignment == 512
    assert dataclasses.replace(devmm.RowMajor()) is devmm.RowMajor()
    assert dataclasses.replace(devmm.Permuted((1, 0)), permutation=(0, 1)) == devmm.Permuted((0, 1))
    with pytest.raises(ValueError, match="not a permutation"):
        dataclasses.replace(devmm.Permuted((1, 0)), permutation=(1, 1))
    assert dataclasses.asdict(devmm.Permuted((1, 0))) == {"permutation": (1, 0)}
    assert dataclasses.astuple(aligned) == ((), 64, 128)


def test_policies_have_what_a_frozen_dataclass_derives_on_this_python() -> None:
    # Whatever this Python's dataclasses derive for a frozen class (from 3.13
    # also __replace__, copy.replace's hook), the policies have it too. Not
    # derived here: the constructor (the policies' is __new__) and the
    # instance dictionary, weak references and annotations.
    record = dataclasses.make_dataclass("Record", [("a", int)], frozen=True)
    derived = set(vars(record)) - {"__init__", "__dict__", "__weakref__", "__annotations__", "__module__", "__doc__"}
    assert {"__dataclass_fields__", "__eq__", "__hash__", "__repr__", "__setattr__"} <= derived
    for policy in (devmm.RowMajor, devmm.ColMajor, devmm.DeviceOptimal, devmm.Permuted, devmm.Aligned):
        missing = {name for name in derived if getattr(policy, name, None) in (None, getattr(object, name, None))}
        assert not missing, (policy, missing)
    if hasattr(copy, "replace"):  # Python 3.13
        aligned = devmm.Aligned(devmm.RowMajor())
        assert copy.replace(aligned, base_alignment=512) == devmm.Aligned(devmm.RowMajor(), 128, 512)  # type: ignore[attr-defined]


def test_the_stubs_declare_the_dataclasses_the_package_makes() -> None:
    # The stub generator declares the classes whose Rust source says
    # "Python dataclass"; devmm/_core/layout.py makes them dataclasses. Each
    # class the stubs call a dataclass is one, with the fields in that order,
    # and every dataclass of the extension is declared.
    import ast
    import pathlib

    stub = pathlib.Path(devmm._devmm.__file__).with_name("_devmm.pyi")
    declared: dict[str, tuple[str, ...]] = {}
    for node in ast.parse(stub.read_text()).body:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.Assign) and ast.unparse(item.targets[0]) == "__match_args__":
                    declared[node.name] = ast.literal_eval(item.value)
    made = {name: cls.__match_args__ for name, cls in vars(devmm._devmm).items() if dataclasses.is_dataclass(cls)}
    assert declared == made
    assert set(declared) == {"RowMajor", "ColMajor", "Permuted", "Aligned", "DeviceOptimal"}
    for name, fields in declared.items():
        assert tuple(f.name for f in dataclasses.fields(getattr(devmm, name))) == fields


@pytest.mark.parametrize("bad", [[-1, 0], [0, 2**64]])
def test_permuted_entries_out_of_range_are_value_errors(bad: list[int]) -> None:
    with pytest.raises(ValueError, match="permutation must list non-negative ints from 0"):
        devmm.Permuted(bad)


def test_python_policies_pickle_copy_and_wrap_as_themselves(cpu: devmm.Device) -> None:
    tiles = Tiles((0, 1))
    for protocol in PROTOCOLS:
        again = pickle.loads(pickle.dumps(tiles, protocol))
        assert type(again) is Tiles and again == tiles and again.order == (0, 1)
    assert copy.deepcopy(tiles) == tiles and copy.copy(tiles) == tiles
    # Aligned takes a Python policy's order, as it takes any policy's.
    wrapped = devmm.Aligned(Tiles(), 8, 16)
    assert wrapped((3, 2), "uint8", cpu).strides == (1, 8)
    assert wrapped == devmm.Aligned(Tiles(), 8, 16) and wrapped.inner == Tiles()
    assert devmm.empty((3, 2), "uint8", layout=wrapped).strides == (1, 8)


def test_a_python_policy_in_a_cycle_through_aligned_is_collected() -> None:
    # Aligned holds its Python inner policy twice (the `inner` field and the
    # core policy that calls it): the collector must see both references.
    class Cyclic(Tiles):
        wrap: Any = None

    for nested in (False, True):
        policy = Cyclic()
        wrapped = devmm.Aligned(policy, 8, 16)
        object.__setattr__(policy, "wrap", devmm.Aligned(wrapped) if nested else wrapped)
        alive = weakref.ref(policy)
        del policy, wrapped
        gc.collect()
        assert alive() is None


def test_resolved_layouts_are_frozen(cpu: devmm.Device) -> None:
    layout = devmm.RowMajor()((2, 3), F32, cpu)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'strides'"):
        layout.strides = (4, 1)  # type: ignore[misc]


def test_permuted_takes_a_sequence_not_an_int() -> None:
    with pytest.raises(TypeError, match="expected a sequence of dimensions for permutation, got int"):
        devmm.Permuted(0)  # type: ignore[arg-type]


def test_an_interrupt_while_reading_a_count_propagates() -> None:
    # An __index__ that raises KeyboardInterrupt stops the program: it is
    # never replaced by the argument's ValueError.
    class Interrupting:
        def __index__(self) -> int:
            raise KeyboardInterrupt

    layout = devmm.Layout((2, 3), (3, 1), F32)
    with pytest.raises(KeyboardInterrupt):
        layout.validate((2, 3), Interrupting())  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        layout.validate((2, Interrupting()))  # type: ignore[arg-type]
