# QG_MPI: find MPI for libqgraph-mpi (the ompi-c pkg-config module, else
# mpicc's own flags), unless --without-mpi, a sanitizer build (Open MPI's
# own leaks and races would fail every test that loads it) or a cross
# build with no MPI for its host.  Sets HAVE_MPI (AM_CONDITIONAL and
# config.h), MPI_CFLAGS, MPI_LIBS, MPIRUN (for the tests), MPI_PC_REQUIRES
# (for libqgraph-mpi.pc), and qg_mpi_summary: "yes" or the reason why not,
# for configure's summary.
AC_DEFUN([QG_MPI], [
  AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--with-mpi], [build libqgraph-mpi (default: where MPI is found; --without-mpi: never)])],
    [], [with_mpi=auto])
  AC_ARG_VAR([MPICC], [the MPI compiler wrapper whose flags libqgraph-mpi takes when pkg-config has no ompi-c])
  qg_mpi_summary=
  MPI_PC_REQUIRES=
  have_mpi=no
  AS_CASE(["$with_mpi:$enable_sanitizers:$CFLAGS"],
    [no:*], [qg_mpi_summary="no (--without-mpi)"],
    [*:yes:*], [qg_mpi_summary="no (--enable-sanitizers: Open MPI itself leaks)"],
    [*-fsanitize=*], [qg_mpi_summary="no (CFLAGS has -fsanitize: Open MPI is not built for it)"],
    [
      PKG_CHECK_MODULES([MPI], [ompi-c], [have_mpi=yes; MPI_PC_REQUIRES=ompi-c], [have_mpi=no])
      AS_IF([test "x$have_mpi" = xno && test "x$cross_compiling" != xyes], [
        AC_PATH_PROG([MPICC], [mpicc])
        AS_IF([test -n "$MPICC" && MPI_CFLAGS=`$MPICC --showme:compile 2>/dev/null` &&
               MPI_LIBS=`$MPICC --showme:link 2>/dev/null`], [have_mpi=yes])
      ])
      AS_IF([test "x$have_mpi" = xyes], [
        qg_save_CFLAGS=$CFLAGS; qg_save_LIBS=$LIBS
        CFLAGS="$CFLAGS $MPI_CFLAGS"; LIBS="$MPI_LIBS $LIBS"
        AC_MSG_CHECKING([whether MPI programs link])
        AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[return MPI_Init(0, 0);]])],
          [AC_MSG_RESULT([yes])], [AC_MSG_RESULT([no]); have_mpi=no])
        CFLAGS=$qg_save_CFLAGS; LIBS=$qg_save_LIBS
      ])
      AS_IF([test "x$have_mpi" = xyes], [qg_mpi_summary=yes],
            [test "x$cross_compiling" = xyes],
            [qg_mpi_summary="no (cross build: no ompi-c for $host)"],
            [qg_mpi_summary="no (neither the ompi-c pkg-config module nor mpicc: install libopenmpi-dev)"])
      AS_IF([test "x$with_mpi" = xyes && test "x$have_mpi" != xyes],
            [AC_MSG_ERROR([--with-mpi: $qg_mpi_summary])])
    ])
  AS_IF([test "x$have_mpi" = xyes], [
    AC_DEFINE([HAVE_MPI], [1], [libqgraph-mpi is built (qgraph-submit's --mpi)])
    AC_PATH_PROG([MPIRUN], [mpirun])
  ], [MPI_CFLAGS=; MPI_LIBS=])
  AC_SUBST([MPI_CFLAGS])
  AC_SUBST([MPI_LIBS])
  AC_SUBST([MPIRUN])
  dnl libqgraph-mpi.pc names ompi-c where it came from pkg-config (qgraph-mpi.h includes mpi.h)
  AC_SUBST([MPI_PC_REQUIRES])
  AM_CONDITIONAL([HAVE_MPI], [test "x$have_mpi" = xyes])
])
