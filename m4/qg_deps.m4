# QG_CHECK_DEPS: find liburing, libcap-ng, libsystemd, nettle, protobuf-c and protoc-c.
# (libsystemd: qgraphd's readiness and socket activation, one code path;
# nettle: SHA-256, by which weights are found without sending them.)
# A missing dependency fails configure and names the Debian package.
AC_DEFUN([QG_PKG_REQUIRE], [
  PKG_CHECK_MODULES([$1], [$2], [],
    [AC_MSG_ERROR([$2 not found: install the Debian package $3 (apt-get install $3)])])
])

AC_DEFUN([QG_CHECK_DEPS], [
  PKG_PROG_PKG_CONFIG
  AS_IF([test -z "$PKG_CONFIG"],
        [AC_MSG_ERROR([pkg-config not found: install the Debian package pkgconf])])
  QG_PKG_REQUIRE([LIBURING], [liburing >= 2.1], [liburing-dev])
  QG_PKG_REQUIRE([LIBCAPNG], [libcap-ng >= 0.7], [libcap-ng-dev])
  QG_PKG_REQUIRE([LIBSYSTEMD], [libsystemd >= 221], [libsystemd-dev])
  QG_PKG_REQUIRE([PROTOBUF_C], [libprotobuf-c >= 1.3], [libprotobuf-c-dev])
  QG_PKG_REQUIRE([NETTLE], [nettle >= 3.4], [nettle-dev])
  AC_ARG_VAR([PROTOC_C], [the protobuf-c compiler])
  AC_PATH_PROG([PROTOC_C], [protoc-c])
  AS_IF([test -z "$PROTOC_C"],
        [AC_MSG_ERROR([protoc-c not found: install the Debian package protobuf-c-compiler])])
])
