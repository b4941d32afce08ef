"""The C extension (tracelens/_native.c, typed by tracelens/_native.pyi: the loader's columns and merge, the
model's nesting, links and steps, the critical path's replay); the rest is in pyproject.toml.

Required: an install without a C compiler fails here, with the compiler's message. The Python twin of each
function is the tests' oracle (`TRACELENS_NO_NATIVE=1`; tracelens/native.py), not a second way to run.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tracelens._native",
            sources=["tracelens/_native.c"],
            depends=["tracelens/_native_fields.h"],  # generated from tracelens/loader/schema.py:Args (fields.py)
            extra_compile_args=["-O2"],
        )
    ]
)
