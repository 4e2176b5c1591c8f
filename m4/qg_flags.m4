# QG_WARN_FLAGS: the warnings and code-generation flags every file is built
# with (those the compiler knows).  -ffp-contract=off: no implicit FMA, so the
# quantizers write the same bytes on every architecture.
AC_DEFUN([QG_WARN_FLAGS], [
  QG_CFLAGS=""
  for qg_flag in -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
                 -Wpointer-arith -Wformat=2 -Wvla -Wno-unused-parameter \
                 -fno-strict-aliasing -fvisibility=hidden -ffp-contract=off; do
    AC_MSG_CHECKING([whether $CC accepts $qg_flag])
    qg_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS -Werror $qg_flag"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([], [])],
      [AC_MSG_RESULT([yes]); QG_CFLAGS="$QG_CFLAGS $qg_flag"], [AC_MSG_RESULT([no])])
    CFLAGS=$qg_save_CFLAGS
  done
  AC_ARG_ENABLE([werror], [AS_HELP_STRING([--enable-werror], [treat warnings as errors])],
                [], [enable_werror=no])
  AS_IF([test "x$enable_werror" = xyes], [QG_CFLAGS="$QG_CFLAGS -Werror"])
  AC_SUBST([QG_CFLAGS])
])

# QG_SANITIZERS: --enable-sanitizers builds everything with ASan+UBSan.
AC_DEFUN([QG_SANITIZERS], [
  AC_ARG_ENABLE([sanitizers],
    [AS_HELP_STRING([--enable-sanitizers], [build with AddressSanitizer and UndefinedBehaviorSanitizer])],
    [], [enable_sanitizers=no])
  AS_IF([test "x$enable_sanitizers" = xyes], [
    SAN_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
    qg_save_CFLAGS=$CFLAGS; qg_save_LDFLAGS=$LDFLAGS
    CFLAGS="$CFLAGS $SAN_CFLAGS"; LDFLAGS="$LDFLAGS $SAN_CFLAGS"
    AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])], [],
      [AC_MSG_ERROR([$CC cannot build with $SAN_CFLAGS (install libasan/libubsan, or libclang-rt-14-dev for clang)])])
    CFLAGS=$qg_save_CFLAGS; LDFLAGS=$qg_save_LDFLAGS
    CFLAGS="$CFLAGS $SAN_CFLAGS"
    LDFLAGS="$LDFLAGS $SAN_CFLAGS"
  ])
])

# QG_FUZZING: --enable-fuzzing builds the libFuzzer targets (clang).
AC_DEFUN([QG_FUZZING], [
  AC_ARG_ENABLE([fuzzing],
    [AS_HELP_STRING([--enable-fuzzing], [build the libFuzzer targets (needs clang)])],
    [], [enable_fuzzing=no])
  dnl every library the targets link is instrumented for coverage too
  AS_IF([test "x$enable_fuzzing" = xyes],
        [CFLAGS="$CFLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer"
         LDFLAGS="$LDFLAGS -fsanitize=address,undefined"])
  AM_CONDITIONAL([ENABLE_FUZZING], [test "x$enable_fuzzing" = xyes])
])

# QG_TEST_WRAPPER: how tests run.  Native builds run them directly; a cross
# build for aarch64 runs each test under qemu-aarch64 once per CPU model
# (tests/qemu-run.sh merges their TAP output).
AC_DEFUN([QG_TEST_WRAPPER], [
  AC_ARG_VAR([TEST_WRAPPER], [command that runs a test program (default: qemu for cross builds)])
  AC_ARG_VAR([QEMU_CPUS], [qemu -cpu models the cross test suite runs on, separated by spaces])
  QEMU_AARCH64=""
  AS_IF([test "x$cross_compiling" = xyes], [
    AS_CASE([$host_cpu],
      [aarch64*], [
        AC_PATH_PROG([QEMU_AARCH64], [qemu-aarch64])
        AS_IF([test -z "$QEMU_AARCH64"],
              [AC_MSG_ERROR([qemu-aarch64 not found: install the Debian package qemu-user])])
        AS_IF([test -z "$QEMU_CPUS"],
              [QEMU_CPUS="cortex-a72 neoverse-n1 max,sve=off max,sve128=on max,sve256=on"])
      ])
  ])
  AC_SUBST([QEMU_AARCH64])
])
