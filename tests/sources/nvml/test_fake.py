"""The fake pynvml stays faithful to the real binding: same function names and parameters, real errors."""

from __future__ import annotations

import inspect

import pynvml
import pytest
from fakes.fake_pynvml import FakeNvml, make_fake_nvml

FAKED = sorted(name for name, fn in inspect.getmembers(FakeNvml, inspect.isfunction) if getattr(fn, "fake", False)
               or name == "nvmlDeviceGetMemoryInfo")


@pytest.mark.parametrize("name", FAKED)
def test_each_faked_function_has_the_real_functions_parameters(name: str) -> None:
    real = inspect.signature(inspect.unwrap(getattr(pynvml, name)))
    fake = inspect.signature(inspect.unwrap(getattr(FakeNvml, name)))
    assert list(fake.parameters)[1:] == list(real.parameters)


ERRORS = [
    (pynvml.NVML_ERROR_NOT_SUPPORTED, "NVMLError_NotSupported"),
    (pynvml.NVML_ERROR_GPU_IS_LOST, "NVMLError_GpuIsLost"),
    (pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, "NVMLError_FunctionNotFound"),
]


@pytest.mark.parametrize(("code", "cls"), ERRORS, ids=[c for _, c in ERRORS])
def test_injected_errors_are_the_real_pynvml_exception_classes_with_their_code(code: int, cls: str) -> None:
    fake = make_fake_nvml()
    fake.nvmlInit()
    fake.inject("nvmlDeviceGetTemperature", code)
    with pytest.raises(getattr(fake, cls)) as info:
        fake.nvmlDeviceGetTemperature(fake.nvmlDeviceGetHandleByIndex(0), fake.NVML_TEMPERATURE_GPU)
    assert info.value.value == code and isinstance(info.value, fake.NVMLError)


def test_a_function_the_fake_does_not_implement_fails_loudly() -> None:
    with pytest.raises(AttributeError, match="does not implement nvmlDeviceGetBoardId"):
        _ = make_fake_nvml().nvmlDeviceGetBoardId


def test_calls_before_init_raise_uninitialized_like_the_real_library() -> None:
    fake = make_fake_nvml()
    with pytest.raises(fake.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()
