// Data-parallel gradients: the mean over the ranks of every gradient,
// reduced in buckets as the backward makes them final (model_loss_and_grad's
// GradientsFinal), so that communication overlaps the rest of the backward.
// The gradients are views of one flat buffer laid out in parameter order
// and the backward finishes them roughly in reverse, so a bucket is a
// contiguous range of that buffer reduced in place: no packing.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ssm/dist/group.h"
#include "ssm/train/model_grad.h"

namespace ssm {

// Moves buckets between the ranks: the mean over the ranks of n floats at
// data (on the gradients' device).
class GradientTransport {
 public:
  virtual ~GradientTransport() = default;
  // May return before the reduction is done; nothing else writes the range
  // until wait().
  virtual void all_reduce_mean(float* data, int64_t n) = 0;
  // Every reduction started is done before the next op on the gradients
  // (on a GPU: the compute stream waits for them).
  virtual void wait() = 0;
  // Milliseconds the last step's computation waited for the reduction
  // after its backward had ended (the communication the backward did not
  // hide; on the CPU, the whole exchange); negative when not known.
  virtual double last_wait_ms() { return -1; }
};

// Host gradients over the group's TCP connections (the CPU backend, and
// tests): the sum in rank order, so every rank gets the same bits.
std::unique_ptr<GradientTransport> make_group_transport(dist::Group& group);

class GradientReducer {
 public:
  // bucket_bytes: the least a bucket holds before it is sent (the last may
  // hold less).
  GradientReducer(Gradients& grads, GradientTransport& transport, int64_t bucket_bytes);

  // A step's last backward begins: nothing is reduced yet.
  void begin();
  // These parameters' gradients are final.
  void mark_final(const std::vector<const Param*>& params);
  // Reduces what is left and waits: every gradient then holds its mean
  // over the ranks.
  void finish();
  // Buckets sent in the last step.
  int64_t buckets() const { return buckets_; }
  GradientTransport& transport() { return transport_; }

 private:
  void send(int64_t lo, int64_t hi);

  Gradients& grads_;
  GradientTransport& transport_;
  int64_t bucket_elements_;
  // The trainable gradients by offset in the flat buffer, ascending.
  struct Piece {
    const Param* param;
    int64_t offset, end;
  };
  std::vector<Piece> pieces_;
  std::vector<bool> ready_;
  size_t next_ = 0;  // pieces_[next_ - 1] is the highest piece not yet in a bucket
  int64_t hi_ = 0;   // flat elements [hi_, end) are sent
  int64_t buckets_ = 0;
};

}  // namespace ssm
