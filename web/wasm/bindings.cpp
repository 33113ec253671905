// The module's JavaScript names (embind) for the model of model_module.h.
#include <emscripten/bind.h>

#include "model_module.h"

EMSCRIPTEN_BINDINGS(ssm) {
  using ssm::web::Model;
  emscripten::class_<Model>("Model")
      .constructor<>()
      .function("load", &Model::load)
      .function("reset", &Model::reset)
      .function("generate", &Model::generate)
      .function("state", &Model::state)
      .function("restore", &Model::restore)
      .function("score", &Model::score)
      .function("adapt", &Model::adapt)
      .function("tokenize", &Model::tokenize)
      .function("info", &Model::info_value)
      .function("externalBegin", &Model::externalBegin)
      .function("externalLogits", &Model::externalLogits)
      .function("externalStep", &Model::externalStep)
      .function("externalEnd", &Model::externalEnd)
      .function("externalAbort", &Model::externalAbort)
      .function("stateTensors", &Model::stateTensors)
      .function("setStateTensor", &Model::setStateTensor);
}
