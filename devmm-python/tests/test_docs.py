"""Runs the seed's example sessions verbatim, and docs/python.md and
docs/observability.md, as doctests.

Markdown code fences are turned into blank lines before parsing, so an
example's expected output ends where its fenced block ends."""

import doctest
import pathlib
import re

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
DOCUMENTS = [
    HERE / "seed_000_api.md",
    HERE / "seed_001_readme.md",
    REPO / "docs" / "python.md",
    REPO / "docs" / "observability.md",
    REPO / "devmm-python" / "README.md",
]
FENCE = re.compile(r"^```[a-z]*[ \t]*$", re.MULTILINE)


#: ADR 0016 item 42: the seed's ``copy=True`` refusal, and what devmm adds
#: to it (the way to a copy, issue 31).
SEED_COPY_REFUSAL = "copy=True is not supported; devmm exports are always zero-copy"
COPY_HINT = "; call Tensor.to(device) for a copy and export that"


class DepartureChecker(doctest.OutputChecker):
    """The seed's output, but for the departures ADR 0016 records in what a
    session prints: item 41, an out-of-memory error is
    ``devmm._out_of_memory.OutOfMemoryError`` (a ``MemoryError``) where the seed's
    exception line names ``MemoryError``; item 42, the ``copy=True`` refusal
    goes on to name ``Tensor.to``."""

    def check_output(self, want: str, got: str, optionflags: int) -> bool:
        departed = "devmm._out_of_memory.OutOfMemoryError: "
        if want.startswith("MemoryError: ") and got.startswith(departed):
            got = "MemoryError: " + got.removeprefix(departed)
        seed_copy = f"BufferError: {SEED_COPY_REFUSAL}\n"
        if want == seed_copy and got == f"BufferError: {SEED_COPY_REFUSAL}{COPY_HINT}\n":
            got = seed_copy
        return super().check_output(want, got, optionflags)


def run_markdown_doctests(path: pathlib.Path) -> doctest.TestResults:
    text = FENCE.sub("", path.read_text())
    test = doctest.DocTestParser().get_doctest(text, {}, path.name, str(path), 0)
    runner = doctest.DocTestRunner(checker=DepartureChecker(), optionflags=doctest.ELLIPSIS)
    runner.run(test)
    return runner.summarize(verbose=False)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_document_examples(path: pathlib.Path) -> None:
    result = run_markdown_doctests(path)
    assert result.attempted > 0, f"{path} has no examples"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {path}"
