#include <cstdio>

#include "strata/status.h"
#include "strata/version.h"

int main() {
  strata::Status s = strata::Status::NotFound("key 7 in table 'ads'");
  if (s.ok() || s.ToString() != "NotFound: key 7 in table 'ads'") return 1;
  std::printf("strata-consumer-ok %s gpus=%d\n", strata::Version(), strata::VisibleGpuCount());
  return 0;
}
