# qg_ggml.m4 - --with-ggml=DIR: build libggml-qgraph.so, the ggml backend,
# against a llama.cpp (or ggml) source tree DIR and its cmake build.
#
# QG_WITH_GGML sets GGML_CPPFLAGS, GGML_LIBS (libggml-base, with an rpath to
# the build's library folder), GGML_BINDIR (that folder), GGML_COMMIT (the commit the tree is at, which
# the backend compares with ggml_commit() before it registers) and the
# conditional HAVE_GGML.  Without the option nothing is needed or built.
AC_DEFUN([QG_WITH_GGML], [
  AC_ARG_WITH([ggml],
    [AS_HELP_STRING([--with-ggml=DIR],
      [build libggml-qgraph.so, a ggml backend, against the llama.cpp or ggml source tree DIR])],
    [], [with_ggml=no])
  AC_ARG_WITH([ggml-build],
    [AS_HELP_STRING([--with-ggml-build=DIR],
      [the cmake build of that tree, holding libggml-base.so (default: DIR/build)])],
    [], [with_ggml_build=])
  qg_ggml_summary=no
  AS_IF([test "x$with_ggml" != xno], [
    AS_IF([test -f "$with_ggml/ggml/include/ggml-backend.h"], [qg_ggml_top=$with_ggml/ggml],
          [test -f "$with_ggml/include/ggml-backend.h"], [qg_ggml_top=$with_ggml],
          [AC_MSG_ERROR([--with-ggml=$with_ggml: no ggml/include/ggml-backend.h or include/ggml-backend.h there])])
    test -n "$with_ggml_build" || with_ggml_build=$with_ggml/build
    qg_ggml_libdir=
    for d in "$with_ggml_build/bin" "$with_ggml_build/ggml/src" "$with_ggml_build/src" "$with_ggml_build"; do
      AS_IF([test -f "$d/libggml-base.so"], [qg_ggml_libdir=$d; break])
    done
    AS_IF([test -z "$qg_ggml_libdir"],
      [AC_MSG_ERROR([no libggml-base.so under $with_ggml_build: build that tree with -DBUILD_SHARED_LIBS=ON (GGML_BACKEND_DL=ON builds qualify), or name its build with --with-ggml-build])])
    qg_ggml_libdir=`cd "$qg_ggml_libdir" && pwd`
    GGML_CPPFLAGS="-isystem $qg_ggml_top/include -isystem $qg_ggml_top/src"
    GGML_LIBS="-L$qg_ggml_libdir -lggml-base -Wl,-rpath,$qg_ggml_libdir"
    AC_MSG_CHECKING([the ggml commit of $with_ggml])
    GGML_COMMIT=`git -C "$with_ggml" rev-parse HEAD 2>/dev/null`
    AS_IF([test -z "$GGML_COMMIT"], [
      dnl not a git tree: ask the library it was built as
      qg_save_LIBS=$LIBS; LIBS="$GGML_LIBS $LIBS"
      AC_RUN_IFELSE([AC_LANG_PROGRAM([[#include <stdio.h>
const char *ggml_commit(void);]], [[FILE *f = fopen("conftest.commit", "w");
return !f || fputs(ggml_commit(), f) < 0 || fclose(f);]])],
        [GGML_COMMIT=`cat conftest.commit`], [], [])
      LIBS=$qg_save_LIBS])
    AS_IF([test -z "$GGML_COMMIT" || test "x$GGML_COMMIT" = xunknown],
      [AC_MSG_ERROR([cannot tell which ggml commit $with_ggml is at (no git, and its library did not say)])])
    AC_MSG_RESULT([$GGML_COMMIT])
    qg_save_CPPFLAGS=$CPPFLAGS; CPPFLAGS="$GGML_CPPFLAGS $CPPFLAGS"
    AC_CHECK_HEADER([ggml-backend-impl.h], [],
      [AC_MSG_ERROR([ggml-backend-impl.h not found under $qg_ggml_top/src])])
    CPPFLAGS=$qg_save_CPPFLAGS
    qg_ggml_summary="$with_ggml (commit `echo $GGML_COMMIT | cut -c1-12`)"
  ])
  AC_SUBST([GGML_CPPFLAGS])
  AC_SUBST([GGML_LIBS])
  AC_SUBST([GGML_COMMIT])
  dnl where the build's programs are (test-backend-ops, llama-*): the tests run them from there
  AC_SUBST([GGML_BINDIR], [$qg_ggml_libdir])
  AM_CONDITIONAL([HAVE_GGML], [test "x$with_ggml" != xno])
])
