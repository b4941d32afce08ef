"""The optional C accelerator of the loader (tracelens/load/_native.c); everything else is in pyproject.toml.

`optional=True`: where it cannot be compiled (no C compiler), the install goes on and the loader uses its
pure-Python path, which gives the same tables.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tracelens.load._native",
            sources=["tracelens/load/_native.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
