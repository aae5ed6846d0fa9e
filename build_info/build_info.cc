#include "build_info/build_info.h"

#include "build_info/stamp.h"

namespace cowkv {

const char* GitCommit() { return COWKV_GIT_COMMIT; }

const char* BuildType() {
#if defined(COWKV_NDEBUG)
  return "opt";
#else
  return "checked";
#endif
}

}  // namespace cowkv
