// The exchange plan and the all-to-all along it (docs/cluster.md, "Routes").
//
// Flat: comm_->AllToAllv, every message straight to its receiver. Two-phase:
// every message is a parcel (a 16-byte head naming its sender, receiver and
// bytes, then the bytes) that travels its route (RoutePlan) one hop per
// stage; a stage is an all-to-all of byte counts and one MPI_Alltoallv of
// the parcels packed per next hop. A rank holds the parcels it forwards in
// its own buffer between stages: the middleman's buffer of the seed's
// two-phase scheme. A parcel reaching its receiver lands where the flat
// exchange would have put it, so the receive buffer is the same byte for
// byte. Every rank runs plan_->stages() stages, whatever it holds.
#include <climits>
#include <cstring>

#include "cluster/cluster_impl.h"

namespace strata::cluster {
namespace {

struct ParcelHead {
  int32_t src;
  int32_t dst;
  uint64_t bytes;
};
static_assert(sizeof(ParcelHead) == 16);

// The placement of each rank's items in an all-to-all buffer, in bytes.
std::vector<uint64_t> ByteOffsets(std::span<const int> counts, uint64_t item_bytes) {
  std::vector<uint64_t> offsets(counts.size() + 1, 0);
  for (size_t r = 0; r < counts.size(); ++r) {
    offsets[r + 1] = offsets[r] + static_cast<uint64_t>(counts[r]) * item_bytes;
  }
  return offsets;
}

void AppendParcel(std::vector<char>* out, int src, int dst, const char* data, uint64_t bytes) {
  const ParcelHead head{src, dst, bytes};
  const size_t at = out->size();
  out->resize(at + sizeof(head) + bytes);
  std::memcpy(out->data() + at, &head, sizeof(head));
  if (bytes > 0) std::memcpy(out->data() + at + sizeof(head), data, bytes);
}

}  // namespace

Status ClusterImpl::PlanExchange() {
  Status local = Status::Ok();
  std::string describe = "flat";
  if (options_.exchange == ClusterExchange::kTwoPhase && comm_->data_on_device()) {
    local = Status::InvalidArgument(
        "ClusterOptions::exchange is two-phase, which the NCCL form does not take: NCCL routes "
        "over NVLink and the NICs itself (use ClusterExchange::kFlat)");
  } else if (options_.exchange == ClusterExchange::kTwoPhase && options_.topology.empty()) {
    local = Status::InvalidArgument(
        "ClusterOptions::exchange is two-phase but ClusterOptions::topology is empty");
  } else if (!options_.topology.empty()) {
    Result<NodeTopology> topology = LoadTopology(options_.topology);
    if (!topology.ok()) {
      local = topology.status();
    } else if (world_size() % topology->gpus != 0) {
      local = Status::InvalidArgument(
          "topology " + options_.topology + " has " + std::to_string(topology->gpus) +
          " GPUs per node, which does not divide the world size " + std::to_string(world_size()));
    } else if (options_.exchange == ClusterExchange::kTwoPhase) {
      Result<RoutePlan> plan =
          RoutePlan::Build(*topology, world_size() / topology->gpus, ExchangeMode::kTwoPhase);
      if (plan.ok()) plan_ = std::move(*plan);
      local = plan.status();
      describe = "two-phase\n" + FormatTopology(*topology);
    }
  }
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(local));
  // Routes must be the same everywhere, or parcels would wait for a hop
  // that never comes; so must the barriers of align_exchanges.
  if (options_.align_exchanges) describe += "\naligned";
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> all, comm_->AllGatherBytes(describe));
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      return Status::InvalidArgument("rank " + std::to_string(r) +
                                     "'s exchange, topology or align_exchanges differs from "
                                     "rank 0's: every rank passes the same "
                                     "ClusterOptions::exchange, topology and align_exchanges");
    }
  }
  return Status::Ok();
}

Status ClusterImpl::Exchange(const void* send, std::span<const int> send_counts, void* recv,
                             std::span<const int> recv_counts, size_t item_bytes) {
  if (!plan_.has_value() || plan_->stages() <= 1) {
    return comm_->AllToAllv(send, send_counts, recv, recv_counts, item_bytes);
  }
  const uint64_t type_bytes = item_bytes;
  const int n = world_size();
  const int me = rank();
  const std::vector<uint64_t> send_at = ByteOffsets(send_counts, type_bytes);
  const std::vector<uint64_t> recv_at = ByteOffsets(recv_counts, type_bytes);
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  std::memcpy(out + recv_at[me], in + send_at[me], send_at[me + 1] - send_at[me]);
  parcels_held_.clear();
  for (int dst = 0; dst < n; ++dst) {
    if (dst != me && send_counts[dst] > 0) {
      AppendParcel(&parcels_held_, me, dst, in + send_at[dst], send_at[dst + 1] - send_at[dst]);
    }
  }
  std::vector<uint64_t> delivered(n, 0);  // bytes landed per sender
  std::vector<int> out_bytes(n), in_bytes(n), next_of;
  for (int stage = 0; stage < plan_->stages(); ++stage) {
    // Where each held parcel goes next, and the bytes per next hop.
    std::vector<uint64_t> to(n, 0);
    next_of.clear();
    for (size_t at = 0; at < parcels_held_.size();) {
      ParcelHead head;
      std::memcpy(&head, parcels_held_.data() + at, sizeof(head));
      const int next = plan_->NextHop(me, head.src, head.dst);
      next_of.push_back(next);
      to[next] += sizeof(head) + head.bytes;
      at += sizeof(head) + head.bytes;
    }
    // A stage's bytes to one rank must fit MPI's int counts; -1 tells every
    // rank (each receives it in the count all-to-all) that this one cannot.
    bool too_big = false;
    for (int r = 0; r < n; ++r) {
      too_big |= to[r] > static_cast<uint64_t>(INT_MAX);
      out_bytes[r] = static_cast<int>(to[r]);
    }
    if (too_big) std::fill(out_bytes.begin(), out_bytes.end(), -1);
    STRATA_RETURN_IF_ERROR(comm_->AllToAll(out_bytes.data(), in_bytes.data(), sizeof(int)));
    for (int r = 0; r < n; ++r) {
      if (in_bytes[r] < 0) {
        return Status::ResourceExhausted("rank " + std::to_string(r) +
                                         ": two-phase exchange: more than 2^31 bytes for one "
                                         "rank in one stage; use smaller batches");
      }
    }
    // Pack per next hop, in rank order.
    std::vector<uint64_t> fill(n + 1, 0);
    for (int r = 0; r < n; ++r) fill[r + 1] = fill[r] + to[r];
    parcels_out_.resize(fill[n]);
    size_t parcel = 0;
    for (size_t at = 0; at < parcels_held_.size(); ++parcel) {
      ParcelHead head;
      std::memcpy(&head, parcels_held_.data() + at, sizeof(head));
      const uint64_t len = sizeof(head) + head.bytes;
      std::memcpy(parcels_out_.data() + fill[next_of[parcel]], parcels_held_.data() + at, len);
      fill[next_of[parcel]] += len;
      if (head.src != me) {
        counters_.bytes_forwarded.fetch_add(head.bytes, std::memory_order_relaxed);
      }
      at += len;
    }
    uint64_t in_total = 0;
    for (int b : in_bytes) in_total += b;
    parcels_in_.resize(in_total);
    STRATA_RETURN_IF_ERROR(
        comm_->AllToAllv(parcels_out_.data(), out_bytes, parcels_in_.data(), in_bytes, 1));
    // Land what is for this rank; hold the rest for the next stage.
    parcels_held_.clear();
    for (size_t at = 0; at < parcels_in_.size();) {
      ParcelHead head;
      std::memcpy(&head, parcels_in_.data() + at, sizeof(head));
      const char* data = parcels_in_.data() + at + sizeof(head);
      if (head.dst == me) {
        if (head.src < 0 || head.src >= n ||
            head.bytes != recv_at[head.src + 1] - recv_at[head.src]) {
          return Status::Internal("rank " + std::to_string(me) +
                                  ": two-phase exchange: a parcel from rank " +
                                  std::to_string(head.src) + " of " + std::to_string(head.bytes) +
                                  " bytes does not match the header's count");
        }
        if (head.bytes > 0) std::memcpy(out + recv_at[head.src], data, head.bytes);
        delivered[head.src] += head.bytes;
      } else {
        AppendParcel(&parcels_held_, head.src, head.dst, data, head.bytes);
      }
      at += sizeof(head) + head.bytes;
    }
  }
  STRATA_ASSERT(parcels_held_.empty(), "two-phase exchange: parcels left after the last stage");
  for (int r = 0; r < n; ++r) {
    const uint64_t want = r == me ? 0 : recv_at[r + 1] - recv_at[r];
    STRATA_ASSERT(delivered[r] == want, "two-phase exchange: a sender's parcel did not arrive");
  }
  return Status::Ok();
}

}  // namespace strata::cluster
