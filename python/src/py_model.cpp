#include "py_model.h"

namespace ssm::python {

std::shared_ptr<Tokenizer> ModelHandle::get_tokenizer() {
  if (!tokenizer) tokenizer = load_tokenizer_for_model(dir);
  return tokenizer;
}

void ModelHandle::check_free() const {
  if (streams > 0)
    throw Error("a streaming generation of this model is still running; iterate it to the end or close() it first");
}

void StateHandle::check_usable(const ModelHandle& model) const {
  if (owner.get() != &model)
    throw Error("this State belongs to another Model (states continue only the model that made them)");
  model.check_free();
  if (in_use) throw Error("this State is being advanced by a streaming generation; finish or close it first");
}

SessionState copy_session(ModelHandle& model, SessionState& session) {
  SessionState copy = make_session(model.model, session.batch());
  for (int64_t b = 0; b < session.batch(); ++b) copy_state_row(copy.model, b, session.model, b, model.ctx);
  copy.model.position = session.model.position;
  copy.pending = session.pending;
  copy.recent = session.recent;
  copy.consumed = session.consumed;
  return copy;
}

}  // namespace ssm::python
