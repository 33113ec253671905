#include "cli/train_ranks.h"

#include <cstdio>
#include <cstdlib>

#include "cli/flags.h"
#include "cli/usage_error.h"
#include "ssm/dist/launch_env.h"
#include "ssm/dist/local_launch.h"
#include "ssm/train/nccl_transport.h"

namespace ssm::cli {

void add_data_parallel_options(CLI::App& cmd, DataParallelArgs& a) {
  cmd.add_option("--gpus", a.gpus,
                 "data parallel: start N ranks of this command on this host, one per GPU (with "
                 "--backend cpu: N CPU processes); under torchrun/srun leave it out; 0: one process, or as torchrun's variables say")
      ->type_name("N")
      ->capture_default_str()
      ->check(whole_number(0, 1024));
  cmd.add_option(
         "--reduce-dtype", a.reduce_dtype,
         "data parallel: the gradient all-reduce's type, f32 or bf16 (bf16 halves the traffic; "
         "GPUs only)")
      ->type_name("TYPE")
      ->capture_default_str()
      ->check(one_of({"f32", "bf16"}));
  cmd.add_option("--bucket-mb", a.bucket_mb,
                 "data parallel: MiB of gradients per all-reduce bucket")
      ->type_name("X")
      ->capture_default_str()
      ->check(real_number(0, 1 << 16, /*min_excluded=*/true));
  cmd.add_option("--rendezvous-timeout", a.rendezvous_timeout,
                 "data parallel: seconds rank 0 waits for every rank to arrive")
      ->type_name("S")
      ->capture_default_str()
      ->check(real_number(0, 86400, /*min_excluded=*/true));
}

namespace {

void check_combination(const DataParallelArgs& a, const std::string& backend) {
  if (backend != "cuda" && a.reduce_dtype != "f32")
    throw UsageError(cat("--reduce-dtype ", a.reduce_dtype,
                         ": only a GPU run (--backend cuda) reduces in ", a.reduce_dtype,
                         "; the CPU ranks reduce in f32"));
  if (backend == "cuda" && !nccl_built())
    throw UsageError(
        "--gpus with --backend cuda: this build has no NCCL (configure with -DSSM_NCCL=ON; "
        "docs/MULTIGPU.md)");
}

}  // namespace

std::optional<int> launch_ranks_if_asked(const DataParallelArgs& a, const std::string& backend) {
  const auto env = dist::read_launch_env();
  if (env) {
    if (a.gpus > 0 && a.gpus != env->world_size)
      throw UsageError(
          cat("--gpus ", a.gpus, " but the launch environment says WORLD_SIZE=", env->world_size));
    return std::nullopt;
  }
  if (a.gpus == 0) {
    if (a.reduce_dtype != "f32") check_combination(a, backend);
    return std::nullopt;
  }
  check_combination(a, backend);
  dist::LocalLaunch l{.argv = dist::own_command_line(), .ranks = a.gpus};
  l.on_start = [](int rank, pid_t pid) {
    std::fprintf(stderr, "ssm: started rank %d (pid %d)\n", rank, static_cast<int>(pid));
  };
  return dist::run_local_ranks(l);
}

std::unique_ptr<Rank> Rank::join(const DataParallelArgs& a, const std::string& backend) {
  const auto env = dist::read_launch_env();
  if (!env) return nullptr;
  check_combination(a, backend);
  if (backend == "cuda") {
    // Before any CUDA call: the rank's GPU becomes its device 0.
    const std::string device =
        dist::visible_device_for(env->local_rank, dist::process_env("CUDA_VISIBLE_DEVICES"));
    ::setenv("CUDA_VISIBLE_DEVICES", device.c_str(), 1);
    ::setenv("NCCL_NVLS_ENABLE", "0", 1);
  }
  std::string blob = env->rank == 0 && backend == "cuda" ? nccl_unique_id() : std::string("cpu");
  dist::Group group = dist::Group::rendezvous(
      *env, blob, std::chrono::milliseconds(static_cast<int64_t>(a.rendezvous_timeout * 1000)));
  return std::unique_ptr<Rank>(new Rank(std::move(group), std::move(blob), a));
}

void Rank::attach(Trainer& trainer, Context& ctx) {
  Gradients& g = trainer.gradients();
  const int64_t bucket_bytes = static_cast<int64_t>(args_.bucket_mb * (1 << 20));
  if (ctx.device() == Device::host()) {
    transport_ = make_group_transport(group_);
  } else {
    // A bucket is at most its threshold plus one gradient: the BF16 buffer
    // takes the whole flat buffer, simplest and never short.
    transport_ = make_nccl_transport(nccl_id_, rank(), world(), ctx, args_.reduce_dtype == "bf16",
                                     g.flat().numel());
  }
  reducer_ = std::make_unique<GradientReducer>(g, *transport_, bucket_bytes);
  trainer.set_data_parallel(&group_, reducer_.get());
  if (root())
    std::fprintf(
        stderr, "ssm: %d ranks: gradients reduced over %s in %s, buckets of %g MiB\n", world(),
        ctx.device() == Device::host() ? "TCP (CPU ranks)" : cat("NCCL ", nccl_version()).c_str(),
        args_.reduce_dtype.c_str(), args_.bucket_mb);
}

bool Rank::any(bool flag) {
  double v = flag ? 1.0 : 0.0;
  group_.all_reduce_sum(&v, 1);
  return v > 0;
}

}  // namespace ssm::cli
