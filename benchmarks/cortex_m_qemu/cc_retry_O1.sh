#!/bin/sh
# CMake compiler launcher (CMAKE_CXX_COMPILER_LAUNCHER) for build_executorch.sh: runs the compile as given;
# where Debian's binutils 2.40 rejects what arm-none-eabi-gcc 12.2 emitted for cortex-m55 (MVE) at -Os
# ("Error: syntax error -- `vcvtne.f64.f32 d0,s0'": a predicated VCVT that gas parses as MVE's VCVTN),
# compiles that file again with -O1 appended, which does not emit it. Says so on stderr.
out=$("$@" 2>&1); rc=$?
if [ $rc -ne 0 ] && printf '%s' "$out" | grep -q "Error: syntax error -- \`vcvt"; then
  for a in "$@"; do case $a in *.cpp|*.c) src=$a;; esac; done
  echo "cc_retry_O1: binutils rejected a predicated vcvt in ${src:-?}: compiled again with -O1" >&2
  exec "$@" -O1
fi
[ -z "$out" ] || printf '%s\n' "$out" >&2
exit $rc
