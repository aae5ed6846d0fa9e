// What build a binary is: version, API, git commit, build type.
#ifndef COWKV_BUILD_INFO_BUILD_INFO_H_
#define COWKV_BUILD_INFO_BUILD_INFO_H_

namespace cowkv {

inline constexpr char kCowkvVersion[] = "0.1.0";
inline constexpr char kApiVersion[] = "cowkv.v1";
// The commit the build came from ("unknown" outside a git checkout; a
// "-dirty" suffix when the tree had changes).
const char* GitCommit();
// "opt" (--config=opt: assertions off) or "checked" (the default build:
// -O2 with assertions and debug checks on).
const char* BuildType();

}  // namespace cowkv

#endif  // COWKV_BUILD_INFO_BUILD_INFO_H_
