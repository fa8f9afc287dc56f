import pytest

pytest.importorskip("torch")


def pytest_collection_modifyitems(config, items):
    """The multi-process runtime tests run one after another on one pytest-xdist worker
    (``--dist loadgroup``, the README's test command): two of them at once put 8-16 gloo
    ranks on a 2-core machine, and one of 151 failed in such a trial run (its output was not
    kept; a rerun passed); the other tests share the remaining workers."""
    for item in items:
        if "/runtime/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.xdist_group("runtime"))
