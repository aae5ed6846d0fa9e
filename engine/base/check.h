// COWKV_CHECK / COWKV_DCHECK: assertions that guard invariants.
//
// Corrupt input is an error (a Status); a broken invariant is a programmer
// error and crashes with the failed expression and location. COWKV_CHECK is
// always on; COWKV_DCHECK is on unless COWKV_NDEBUG is defined (--config=opt).
#ifndef COWKV_ENGINE_BASE_CHECK_H_
#define COWKV_ENGINE_BASE_CHECK_H_

namespace cowkv {
namespace internal {
[[noreturn]] void CheckFailed(const char* expr, const char* file, int line,
                              const char* msg);
}  // namespace internal
}  // namespace cowkv

#define COWKV_CHECK(cond)                                                  \
  do {                                                                     \
    if (__builtin_expect(!(cond), 0))                                      \
      ::cowkv::internal::CheckFailed(#cond, __FILE__, __LINE__, nullptr);  \
  } while (0)

#define COWKV_CHECK_MSG(cond, msg)                                         \
  do {                                                                     \
    if (__builtin_expect(!(cond), 0))                                      \
      ::cowkv::internal::CheckFailed(#cond, __FILE__, __LINE__, (msg));    \
  } while (0)

// 1 when COWKV_DCHECK is compiled in, for tests of DCHECKs (EXPECT_DEATH
// on a compiled-out DCHECK would run the bad call instead): skip them when 0.
#ifdef COWKV_NDEBUG
#define COWKV_DCHECK_IS_ON 0
#else
#define COWKV_DCHECK_IS_ON 1
#endif

#ifdef COWKV_NDEBUG
#define COWKV_DCHECK(cond) \
  do {                     \
    (void)sizeof(cond);    \
  } while (0)
#else
#define COWKV_DCHECK(cond) COWKV_CHECK(cond)
#endif

#endif  // COWKV_ENGINE_BASE_CHECK_H_
