#!/bin/sh
# A C compiler that rejects OpenMP the way Apple clang and other OpenMP-less compilers do, so the serial
# fallback of setup.py can be built and tested on Linux:  CC=tools/cc_no_openmp.sh pip install -e .
# Everything else is passed to $REAL_CC (default: cc).
for a in "$@"; do
  case "$a" in
    -fopenmp|-fopenmp=*|-lomp|-lgomp|-liomp5|/openmp)
      echo "cc_no_openmp: error: unsupported option '$a'" >&2
      exit 1 ;;
  esac
done
exec "${REAL_CC:-cc}" "$@"
