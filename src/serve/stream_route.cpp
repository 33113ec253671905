// A completion as server-sent events, in OpenAI's framing: one
// "data: {chunk}\n\n" per piece of text, a last chunk with the finish reason
// and usage, then "data: [DONE]". A client that goes away cancels the job;
// the session keeps the state reached and is saved either way.
#include <httplib.h>

#include "serve/exchange.h"
#include "ssm/core/error.h"
#include "ssm/serve/api_error.h"

namespace ssm::serve {

void Server::stream(std::shared_ptr<Exchange> ex, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [this, ex](size_t, httplib::DataSink& sink) {
    const bool chat = ex->request.chat;
    const std::string object = chat ? "chat.completion.chunk" : "text_completion";
    const auto send = [&](const json& doc) {
      const std::string event = "data: " + dump(doc) + "\n\n";
      return sink.is_writable() && sink.write(event.data(), event.size());
    };
    const auto chunk = [&](const std::string& text, const json& finish) {
      json doc = ex->envelope(object, options_.model_name);
      doc["choices"] = json::array({ex->choice(json_text(text), finish, true)});
      return doc;
    };
    bool open = !chat || send(chunk("", nullptr));
    Job& job = *ex->job;
    while (open && !job.done()) {
      std::string piece;
      {
        std::unique_lock lock(ex->text_mutex);
        ex->text_changed.wait_for(lock, std::chrono::milliseconds(20));
        piece = ex->text.take_ready();
      }
      if (!piece.empty()) open = send(chunk(piece, nullptr));
    }
    if (!open) {  // the client is gone: stop its work, keep its session's state
      job.cancelled = true;
      job.wait();
      ex->save();
      return false;
    }
    std::string rest;
    {
      const std::lock_guard lock(ex->text_mutex);
      rest = ex->text.take_rest();
    }
    if (!rest.empty()) send(chunk(rest, nullptr));
    if (job.finish == Finish::kError) {
      send(error_body(500, cat("generation failed: ", job.error)));
    } else {
      ex->save();
      if (!ex->save_error.empty()) {
        send(error_body(500, cat("the session could not be saved: ", ex->save_error)));
      } else {
        json last = chunk("", finish_name(job.finish));
        last["usage"] = ex->usage();
        last["ssm"] = ex->extension();
        send(last);
      }
    }
    const std::string done = "data: [DONE]\n\n";
    sink.write(done.data(), done.size());
    sink.done();
    metrics_.observe_latency(std::chrono::duration<double>(std::chrono::steady_clock::now() - ex->arrived).count());
    return true;
  });
}

}  // namespace ssm::serve
