"""Build the Cython engine (``cyext/``) into ``terrazero_env._engine``.

Set ``TERRAZERO_DEBUG=1`` to compile with bounds and wraparound checks on (slower; for debugging
index errors in the engine).
"""

import os

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("TERRAZERO_DEBUG", "0") == "1"

directives = {
    "language_level": "3",
    "boundscheck": DEBUG,
    "wraparound": True,  # Python-level setup code uses negative slices; hot loops use raw pointers
    "initializedcheck": DEBUG,
    "cdivision": True,
    "embedsignature": True,
}

extensions = [
    Extension(
        "terrazero_env._engine",
        ["cyext/_engine.pyx"],
        include_dirs=[np.get_include(), "cyext"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=(["-O3"] if not DEBUG else ["-O0", "-g"]) + ["-fopenmp"],
        extra_link_args=["-fopenmp"],
    )
]

setup(ext_modules=cythonize(extensions, compiler_directives=directives, include_path=["cyext"]))
