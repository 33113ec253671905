#include "ssm/train/grad_reducer.h"

#include <algorithm>
#include <chrono>

#include "ssm/core/error.h"

namespace ssm {
namespace {

class GroupTransport : public GradientTransport {
 public:
  explicit GroupTransport(dist::Group& group) : group_(group) {}
  void all_reduce_mean(float* data, int64_t n) override {
    const auto t0 = std::chrono::steady_clock::now();
    group_.all_reduce_mean(data, static_cast<size_t>(n));
    spent_ms_ +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  void wait() override {
    last_ms_ = spent_ms_;
    spent_ms_ = 0;
  }
  double last_wait_ms() override { return last_ms_; }

 private:
  dist::Group& group_;
  double spent_ms_ = 0, last_ms_ = -1;
};

}  // namespace

std::unique_ptr<GradientTransport> make_group_transport(dist::Group& group) {
  return std::make_unique<GroupTransport>(group);
}

GradientReducer::GradientReducer(Gradients& grads, GradientTransport& transport,
                                 int64_t bucket_bytes)
    : grads_(grads),
      transport_(transport),
      bucket_elements_(std::max<int64_t>(1, bucket_bytes / static_cast<int64_t>(sizeof(float)))) {
  const Tensor& flat = grads.flat();
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads.grad(i);
    if (g.numel() == 0) continue;
    const int64_t offset =
        (static_cast<const char*>(g.raw()) - static_cast<const char*>(flat.raw())) /
        static_cast<int64_t>(sizeof(float));
    pieces_.push_back({&grads.param(i), offset, offset + g.numel()});
  }
  std::sort(pieces_.begin(), pieces_.end(),
            [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
  begin();
}

void GradientReducer::begin() {
  ready_.assign(pieces_.size(), false);
  next_ = pieces_.size();
  hi_ = grads_.flat().numel();
  buckets_ = 0;
}

void GradientReducer::send(int64_t lo, int64_t hi) {
  if (hi <= lo) return;
  Tensor flat = grads_.flat();  // shares the buffer
  transport_.all_reduce_mean(static_cast<float*>(flat.raw()) + lo, hi - lo);
  ++buckets_;
  hi_ = lo;
}

void GradientReducer::mark_final(const std::vector<const Param*>& params) {
  for (const Param* p : params)
    for (size_t i = 0; i < pieces_.size(); ++i)
      if (pieces_[i].param == p) ready_[i] = true;
  // The ready pieces just below what is sent join the pending bucket; it
  // goes once it is big enough. (The padding between pieces goes with them:
  // zeros on every rank.)
  while (next_ > 0 && ready_[next_ - 1]) {
    --next_;
    const int64_t lo = next_ == 0 ? 0 : pieces_[next_].offset;
    if (hi_ - lo >= bucket_elements_) send(lo, hi_);
  }
}

void GradientReducer::finish() {
  send(0, hi_);
  next_ = 0;
  transport_.wait();
}

}  // namespace ssm
