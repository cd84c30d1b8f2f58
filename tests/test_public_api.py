"""Pins feedkv's public surface: what the package exports and the shape of its errors.

Changing one of these lists is a deliberate API change; update the test with it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import feedkv
import feedkv.errors
import feedkv.storage
import feedkv.util

EXPECTED_TOP_LEVEL = ["DB", "FeedKVError", "Span", "Timestamp", "Txn", "connect"]


def _submodule_names(package: ModuleType) -> list[str]:
    return sorted(
        f"{package.__name__}.{info.name}"
        for info in pkgutil.iter_modules(package.__path__)
        if not info.name.startswith("_")
    )


PUBLIC_MODULES = _submodule_names(feedkv.util) + _submodule_names(feedkv.storage)
ALL_MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(feedkv.__path__, prefix="feedkv.")
    if not any(part.startswith("_") for part in info.name.split("."))
)


def test_top_level_exports_are_pinned() -> None:
    assert feedkv.__all__ == EXPECTED_TOP_LEVEL


def test_star_import_exposes_exactly_the_pinned_names() -> None:
    namespace: dict[str, object] = {}
    exec("from feedkv import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == EXPECTED_TOP_LEVEL


def test_top_level_exports_are_the_canonical_objects() -> None:
    from feedkv.errors import FeedKVError
    from feedkv.util.hlc import Timestamp
    from feedkv.util.keys import Span

    assert feedkv.FeedKVError is FeedKVError
    assert feedkv.Timestamp is Timestamp
    assert feedkv.Span is Span


def test_package_has_a_version() -> None:
    assert isinstance(feedkv.__version__, str)
    assert feedkv.__version__


def test_public_module_discovery_finds_the_core_modules() -> None:
    # Guards the parametrization below against silently collecting nothing.
    assert {"feedkv.util.hlc", "feedkv.util.keys", "feedkv.storage.mvcc"} <= set(PUBLIC_MODULES)


@pytest.mark.parametrize("module_name", [*PUBLIC_MODULES, "feedkv.errors"])
def test_public_module_declares_all_with_existing_unique_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{module_name} does not define __all__"
    assert isinstance(exported, list | tuple)
    assert all(isinstance(name, str) for name in exported)
    missing = [name for name in exported if not hasattr(module, name)]
    assert not missing, f"{module_name}.__all__ names undefined {missing}"
    assert len(set(exported)) == len(exported), f"{module_name}.__all__ has duplicates"
    assert not [name for name in exported if name.startswith("_")]


@pytest.mark.parametrize("name", feedkv.errors.__all__)
def test_every_exported_error_derives_from_feedkv_error(name: str) -> None:
    error = getattr(feedkv.errors, name)
    assert inspect.isclass(error)
    assert issubclass(error, feedkv.FeedKVError)


@pytest.mark.parametrize("module_name", ALL_MODULES)
def test_every_exception_class_defined_in_feedkv_derives_from_feedkv_error(
    module_name: str,
) -> None:
    module = importlib.import_module(module_name)
    strays = [
        name
        for name, obj in vars(module).items()
        if inspect.isclass(obj)
        and obj.__module__ == module_name
        and issubclass(obj, BaseException)
        and not issubclass(obj, feedkv.FeedKVError)
    ]
    assert not strays, f"{module_name} defines errors outside the tree: {strays}"


def test_feedkv_error_is_an_exception() -> None:
    assert issubclass(feedkv.FeedKVError, Exception)


def test_invalid_argument_errors_are_value_errors() -> None:
    from feedkv.errors import (
        InvalidArgumentError,
        InvalidKeyError,
        InvalidSpanError,
        TimestampParseError,
        ValueTooLargeError,
    )

    for error in (
        InvalidArgumentError,
        TimestampParseError,
        InvalidKeyError,
        InvalidSpanError,
        ValueTooLargeError,
    ):
        assert issubclass(error, ValueError), error
        assert issubclass(error, InvalidArgumentError), error


def test_only_argument_errors_are_value_errors() -> None:
    from feedkv.errors import InvalidArgumentError

    value_errors = {
        name
        for name in feedkv.errors.__all__
        if issubclass(getattr(feedkv.errors, name), ValueError)
    }
    argument_errors = {
        name
        for name in feedkv.errors.__all__
        if issubclass(getattr(feedkv.errors, name), InvalidArgumentError)
    }
    assert value_errors == argument_errors


def test_retryable_errors_are_conflicts_restarts_and_routing() -> None:
    from feedkv.errors import RetryableError

    retryable = {
        name
        for name in feedkv.errors.__all__
        if issubclass(getattr(feedkv.errors, name), RetryableError)
    }
    assert retryable == {
        "RetryableError",
        "WriteIntentError",
        "WriteTooOldError",
        "TransactionRetryError",
        "TransactionAbortedError",
        "RangeRoutingError",
        "RangeKeyMismatchError",
        "RangeNotFoundError",
        "NotLeaseHolderError",  # another replica of the range holds its lease
        "RangeUnavailableError",  # the range is moving between nodes
        "PushFailedError",  # the pushed transaction outranks the pusher: wait for it
        "SerializationFailure",  # SQLSTATE 40001: restart the SQL transaction
    }


def test_storage_error_is_an_external_fault() -> None:
    from feedkv.errors import ExternalError, RetryableError, StorageError

    assert issubclass(StorageError, ExternalError)
    assert not issubclass(StorageError, RetryableError)
