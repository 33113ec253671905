// ssm.Trainer: the engine's training loop (AdamW, warmup + cosine schedule,
// clipping, WSLA) stepped from Python.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "py_model.h"
#include "ssm/train/trainer.h"

namespace ssm::python {
namespace {

namespace py = pybind11;

struct TrainerHandle {
  ModelPtr model;
  std::vector<int32_t> tokens;  // the Trainer reads them by reference
  std::unique_ptr<Trainer> trainer;
};

std::vector<int32_t> training_tokens(ModelHandle& m, const py::handle& data) {
  std::vector<int32_t> ids;
  if (py::isinstance<py::str>(data)) return m.get_tokenizer()->encode(data.cast<std::string>());
  py::array arr = py::module_::import("numpy").attr("asarray")(data);
  if (arr.dtype().kind() != 'i' && arr.dtype().kind() != 'u')
    throw Error("Trainer: data must be a str (text) or a sequence of int token ids");
  const int64_t vocab = m.model.config().vocab_size;
  for (const py::handle v : arr.attr("ravel")().attr("tolist")()) {
    const int64_t id = v.cast<int64_t>();
    if (id < 0 || id >= vocab)
      throw Error(cat("Trainer: token id ", id, " is outside the model's vocabulary [0, ", vocab, ")"));
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

std::unique_ptr<TrainerHandle> make_trainer(const ModelPtr& m, const py::handle& data, double lr, int64_t steps,
                                            bool wsla, int64_t batch, int64_t seq_len, int64_t warmup,
                                            double weight_decay, double clip, uint64_t seed,
                                            double dropout) {
  const auto check = [](bool ok, const std::string& what) {
    if (!ok) throw Error(cat("Trainer: ", what));
  };
  check(lr > 0 && lr <= 10, cat("lr=", lr, ": must be in (0, 10]"));
  check(steps >= 1, cat("steps=", steps, ": must be at least 1"));
  check(batch >= 1 && batch <= 4096, cat("batch=", batch, ": must be in [1, 4096]"));
  check(seq_len >= 2 && seq_len <= (1 << 20), cat("seq_len=", seq_len, ": must be in [2, 2^20]"));
  check(warmup >= 0, cat("warmup=", warmup, ": must be at least 0"));
  check(weight_decay >= 0, cat("weight_decay=", weight_decay, ": must be at least 0"));
  check(dropout >= 0 && dropout < 1, cat("dropout=", dropout, ": must be in [0, 1)"));
  m->check_free();
  // Training updates F32 master weights: bfloat16 and float16 projections
  // (a bfloat16 checkpoint's default) are widened to them exactly by the
  // Trainer; int8 ones are a rounding of the weights, not the weights.
  check(m->model.projection_dtype() != DType::kQ8,
        "the model's projections were loaded as int8; training needs float32 master weights "
        "(bfloat16 and float16 are widened to them): ssm.load(path, dtype='float32')");
  auto h = std::make_unique<TrainerHandle>();
  h->model = m;
  h->tokens = training_tokens(*m, data);
  if (static_cast<int64_t>(h->tokens.size()) < seq_len + 1)
    throw Error(cat("Trainer: the data is ", h->tokens.size(), " tokens, fewer than one window of seq_len + 1 = ",
                    seq_len + 1));
  TrainOptions opt;
  opt.lr = lr;
  opt.steps = steps;
  opt.wsla = wsla;
  opt.batch = batch;
  opt.seq_len = seq_len;
  opt.warmup = warmup;
  opt.weight_decay = weight_decay;
  opt.clip = clip;
  opt.seed = seed;
  opt.dropout = dropout;
  py::gil_scoped_release release;
  std::lock_guard lock(m->busy);
  h->trainer = std::make_unique<Trainer>(m->model, h->tokens, opt, m->ctx);
  return h;
}

double step(TrainerHandle& h) {
  if (h.trainer->finished())
    throw Error(cat("Trainer: all ", h.trainer->options().steps, " steps are done"));
  h.model->check_free();
  py::gil_scoped_release release;
  std::lock_guard lock(h.model->busy);
  return h.trainer->step().loss;
}

}  // namespace

void bind_trainer(py::module_& m) {
  py::class_<TrainerHandle>(m, "Trainer",
                            "Trains a Model in place on text or token ids (the loop `ssm train` runs).")
      .def(py::init(&make_trainer), py::arg("model"), py::arg("data"), py::kw_only(), py::arg("lr") = 1e-3,
           py::arg("steps") = 1000, py::arg("wsla") = false, py::arg("batch") = 8, py::arg("seq_len") = 256,
           py::arg("warmup") = 100, py::arg("weight_decay") = 0.1, py::arg("clip") = 1.0,
           py::arg("seed") = 0, py::arg("dropout") = 0.0,
           "data: a str (through the model's tokenizer) or token ids. wsla: train only the B and C rows of "
           "each SSM in_proj. dropout: residual dropout, as `ssm train --dropout` (the probability of "
           "zeroing each element of the embedding's and each mixer's output; masks drawn from seed). "
           "bfloat16/float16 projections are widened to float32 master weights in place.")
      .def("step", &step, "One optimizer step; returns its mean training loss (nats per token).")
      .def_property_readonly("steps_done", [](const TrainerHandle& h) { return h.trainer->steps_done(); })
      .def_property_readonly("finished", [](const TrainerHandle& h) { return h.trainer->finished(); })
      .def("save_checkpoint", [](TrainerHandle& h, const std::string& dir) {
             py::gil_scoped_release release;
             std::lock_guard lock(h.model->busy);
             h.trainer->save_checkpoint(dir);
           },
           py::arg("dir"), "Write dir/model.safetensors and dir/checkpoint.safetensors (resumable by `ssm train --resume`).");
}

}  // namespace ssm::python
