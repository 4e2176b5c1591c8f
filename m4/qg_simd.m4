# QG_SIMD_FLAGS: probe the per-file flags of every SIMD kernel family.
#
# Each family is compiled in a file of its own with its own flags, so one
# binary carries every kernel and the dispatcher picks one at run time.
# A family whose flags the compiler refuses is left out (and said so).

# QG_SIMD_PROBE(VAR, FLAGS, INCLUDES, BODY): set VAR to FLAGS if they compile BODY.
AC_DEFUN([QG_SIMD_PROBE], [
  AS_VAR_PUSHDEF([qg_cache], [qg_cv_simd_$1])
  AC_CACHE_CHECK([for $2], [qg_cache], [
    qg_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS $2"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([$3], [$4])],
                      [AS_VAR_SET([qg_cache], [yes])], [AS_VAR_SET([qg_cache], [no])])
    CFLAGS=$qg_save_CFLAGS])
  AS_VAR_IF([qg_cache], [yes], [
    AC_SUBST([$1_CFLAGS], ["$2"])
    AC_DEFINE([HAVE_$1], [1], [the compiler builds the $1 kernels])
    qg_simd_summary="$qg_simd_summary m4_tolower($1)"
    have_$1=yes], [have_$1=no])
  AS_VAR_POPDEF([qg_cache])
])

AC_DEFUN([QG_SIMD_FLAGS], [
  qg_simd_summary="portable"
  have_NEON=no; have_DOTPROD=no; have_I8MM=no; have_SVE=no
  have_AVX2=no; have_AVX512VNNI=no
  AS_CASE([$host_cpu],
  [aarch64*], [
    QG_SIMD_PROBE([NEON], [-march=armv8-a], [[#include <arm_neon.h>]],
      [[int8x16_t a = vdupq_n_s8(1); int16x8_t r = vmull_s8(vget_low_s8(a), vget_low_s8(a)); return vgetq_lane_s16(r, 0);]])
    QG_SIMD_PROBE([DOTPROD], [-march=armv8.2-a+dotprod], [[#include <arm_neon.h>]],
      [[int8x16_t a = vdupq_n_s8(1); int32x4_t r = vdotq_s32(vdupq_n_s32(0), a, a); return vgetq_lane_s32(r, 0);]])
    QG_SIMD_PROBE([I8MM], [-march=armv8.2-a+dotprod+i8mm], [[#include <arm_neon.h>]],
      [[int8x16_t a = vdupq_n_s8(1); int32x4_t r = vmmlaq_s32(vdupq_n_s32(0), a, a); return vgetq_lane_s32(r, 0);]])
    QG_SIMD_PROBE([SVE], [-march=armv8.2-a+dotprod+i8mm+sve], [[#include <arm_sve.h>]],
      [[svint32_t r = svdot_s32(svdup_n_s32(0), svdup_n_s8(1), svdup_n_s8(1)); return (int)svaddv_s32(svptrue_b32(), r) + (int)svcntb();]])
  ],
  [x86_64*|amd64*], [
    QG_SIMD_PROBE([AVX2], [-mavx2 -mfma -mf16c], [[#include <immintrin.h>]],
      [[__m256i a = _mm256_set1_epi8(1); __m256i r = _mm256_maddubs_epi16(a, a); return _mm256_extract_epi32(r, 0);]])
    QG_SIMD_PROBE([AVX512VNNI], [-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni], [[#include <immintrin.h>]],
      [[__m512i a = _mm512_set1_epi8(1); __m512i r = _mm512_dpbusd_epi32(_mm512_setzero_si512(), a, a); return _mm512_reduce_add_epi32(r);]])
  ])
  AM_CONDITIONAL([HAVE_NEON], [test "x$have_NEON" = xyes])
  AM_CONDITIONAL([HAVE_DOTPROD], [test "x$have_DOTPROD" = xyes])
  AM_CONDITIONAL([HAVE_I8MM], [test "x$have_I8MM" = xyes])
  AM_CONDITIONAL([HAVE_SVE], [test "x$have_SVE" = xyes])
  AM_CONDITIONAL([HAVE_AVX2], [test "x$have_AVX2" = xyes])
  AM_CONDITIONAL([HAVE_AVX512VNNI], [test "x$have_AVX512VNNI" = xyes])
])
