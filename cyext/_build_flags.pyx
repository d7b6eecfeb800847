# cython: language_level=3
"""terrazero_env._build_flags: how the engine was compiled, read from the C preprocessor.

``setup.py`` compiles every extension with the same flags, so what this module sees (the compiler's own
``_OPENMP`` macro, ``TERRAZERO_OPENMP`` from the build's OpenMP probe, ``TERRAZERO_DEBUG``) holds for
``terrazero_env._engine`` too. ``terrazero_env.build_info()`` is the public reader.
"""

cdef extern from *:
    """
    #ifndef TERRAZERO_OPENMP
    #define TERRAZERO_OPENMP 0
    #endif
    #ifndef TERRAZERO_DEBUG
    #define TERRAZERO_DEBUG 0
    #endif
    #ifdef _OPENMP
    #define TZ_OPENMP_SPEC _OPENMP
    #else
    #define TZ_OPENMP_SPEC 0
    #endif
    #define TZ_STR2(x) #x
    #define TZ_STR(x) TZ_STR2(x)
    #if defined(__clang__) && defined(__apple_build_version__)
    #define TZ_COMPILER "Apple clang " __clang_version__
    #elif defined(__clang__)
    #define TZ_COMPILER "clang " __clang_version__
    #elif defined(__GNUC__)
    #define TZ_COMPILER "gcc " __VERSION__
    #elif defined(_MSC_FULL_VER)
    #define TZ_COMPILER "MSVC " TZ_STR(_MSC_FULL_VER)
    #else
    #define TZ_COMPILER "unknown"
    #endif
    """
    const char* TZ_COMPILER
    int TZ_OPENMP_SPEC
    int TERRAZERO_OPENMP
    int TERRAZERO_DEBUG

#: Compiler name and version string as the compiler reports it.
COMPILER = TZ_COMPILER.decode("utf-8", "replace").strip()
#: The ``_OPENMP`` macro (``yyyymm`` of the supported OpenMP specification), 0 in a serial build.
OPENMP_SPEC = TZ_OPENMP_SPEC
#: Whether the build's OpenMP probe enabled OpenMP flags.
OPENMP_REQUESTED = bool(TERRAZERO_OPENMP)
#: Whether the engine was compiled with ``TERRAZERO_DEBUG=1`` (bounds checks on, no optimisation).
DEBUG = bool(TERRAZERO_DEBUG)
