# QG_REQUIRE_C11: make sure the compiler speaks C11 with GNU extensions.
AC_DEFUN([QG_REQUIRE_C11], [
  AC_CACHE_CHECK([whether $CC accepts -std=gnu11], [qg_cv_gnu11], [
    qg_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS -std=gnu11"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <stdatomic.h>
_Static_assert(sizeof(int) >= 4, "int");
static _Atomic int x;]], [[atomic_store_explicit(&x, 1, memory_order_release);]])],
      [qg_cv_gnu11=yes], [qg_cv_gnu11=no])
    CFLAGS=$qg_save_CFLAGS])
  AS_IF([test "x$qg_cv_gnu11" != xyes],
        [AC_MSG_ERROR([a C11 compiler with <stdatomic.h> is required (gcc >= 5 or clang >= 3.6)])])
  AS_CASE([" $CFLAGS "], [*" -std="*], [], [CFLAGS="$CFLAGS -std=gnu11"])
])
