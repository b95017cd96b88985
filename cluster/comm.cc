// Comm (comm.h): the agreement every transport shares, over its AllGather.
#include "cluster/comm.h"

#include <algorithm>

namespace strata::cluster {

Status StatusWithCode(StatusCode code, std::string msg) {
  switch (code) {
    case StatusCode::kInvalidArgument:
      return Status::InvalidArgument(std::move(msg));
    case StatusCode::kNotFound:
      return Status::NotFound(std::move(msg));
    case StatusCode::kIOError:
      return Status::IOError(std::move(msg));
    case StatusCode::kCorruption:
      return Status::Corruption(std::move(msg));
    case StatusCode::kResourceExhausted:
      return Status::ResourceExhausted(std::move(msg));
    case StatusCode::kFailedPrecondition:
      return Status::FailedPrecondition(std::move(msg));
    case StatusCode::kUnavailable:
      return Status::Unavailable(std::move(msg));
    case StatusCode::kOk:
    case StatusCode::kInternal:
      break;
  }
  return Status::Internal(std::move(msg));
}

Status Comm::AgreeOn(const Status& local) {
  if (size() == 1) {  // nobody to agree with: the same message, no collective
    STRATA_RETURN_IF_ERROR(CheckUsable());
    return local.ok() ? Status::Ok() : StatusWithCode(local.code(), "rank 0: " + local.message());
  }
  const int32_t mine = static_cast<int32_t>(local.code());
  agree_codes_.resize(size());
  STRATA_RETURN_IF_ERROR(AllGather(&mine, agree_codes_.data(), sizeof(mine)));
  return AgreeOnKnown(agree_codes_, local);
}

Status Comm::Barrier() {
  const uint8_t mine = 0;
  barrier_bytes_.resize(size());
  return AllGather(&mine, barrier_bytes_.data(), sizeof(mine));
}

Result<std::vector<std::string>> Comm::AllGatherBytesPadded(const std::string& mine) {
  const uint64_t len = mine.size();
  std::vector<uint64_t> lens(size());
  STRATA_RETURN_IF_ERROR(AllGather(&len, lens.data(), sizeof(len)));
  const uint64_t longest = *std::max_element(lens.begin(), lens.end());
  std::vector<std::string> out(size());
  if (longest == 0) return out;
  std::string padded = mine;
  padded.resize(longest, '\0');
  std::string all(longest * size(), '\0');
  STRATA_RETURN_IF_ERROR(AllGather(padded.data(), all.data(), longest));
  for (int r = 0; r < size(); ++r) out[r] = all.substr(r * longest, lens[r]);
  return out;
}

Status Comm::AgreeOnKnown(std::span<const int32_t> codes, const Status& local) {
  const auto failed = std::find_if(codes.begin(), codes.end(), [](int32_t c) { return c != 0; });
  if (failed == codes.end()) return Status::Ok();
  // Every rank knows someone failed, so every rank gathers the messages.
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> messages,
                          AllGatherBytes(local.ok() ? std::string() : local.message()));
  const int at = static_cast<int>(failed - codes.begin());
  return StatusWithCode(static_cast<StatusCode>(*failed),
                        "rank " + std::to_string(at) + ": " + messages[at]);
}

}  // namespace strata::cluster
