"""The optional C extension (tracelens/_native.c: the loader's columns and merge, the model's nesting, links and
steps); the rest is in pyproject.toml.

`optional=True`: where it cannot be compiled (no C compiler), the install goes on and the loader uses its
pure-Python path, which gives the same tables.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tracelens._native",
            sources=["tracelens/_native.c"],
            depends=["tracelens/_native_fields.h"],  # generated from tracelens/loader/schema.py:Args (fields.py)
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
