// Implementation of runner/serve/server.h: routes, errors as OpenAI's JSON,
// server-sent events, shutdown on SIGINT/SIGTERM.
#include "runner/serve/server.h"

#ifdef ZOO_HAVE_HTTPLIB
#include <httplib.h>
#endif
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <iostream>
#include <thread>

#include "runner/generate.h"
#include "runner/log.h"
#include "runner/serve/completions.h"
#include "runner/serve/engine.h"

namespace zoo::serve {

#ifndef ZOO_HAVE_HTTPLIB
void run_serve(const ServeCommand&) {
  throw std::runtime_error(
      "zoo serve: this zoo was built without cpp-httplib (Debian: libcpp-httplib-dev); install "
      "it and build again");
}
#else

using nlohmann::json;

namespace {

// SIGINT/SIGTERM write a byte here (all a handler may safely do, on whichever thread LibTorch's pools leave the
// signal to); a thread reading it stops the server.
int stop_pipe[2] = {-1, -1};
void on_stop_signal(int signal) {
  const char byte = static_cast<char>(signal);
  [[maybe_unused]] const ssize_t n = write(stop_pipe[1], &byte, 1);
}

void send_json(httplib::Response& res, const json& body, int status = 200) {
  res.status = status;
  res.set_content(dump_json(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, error_json(e), e.status); }

// Runs `handle`, answering what it throws as OpenAI's error JSON: the request's fault (ApiError) with its
// status, anything else (the model, the tokenizer) with 500 and what it said. The server never dies of a request.
template <typename Handle>
void answer(httplib::Response& res, Handle&& handle) {
  try {
    handle();
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const std::exception& e) {
    send_error(res, ApiError(500, e.what(), "", "server_error"));
  }
}

// A completion, whole or streamed: the request is checked before a stream starts, so a bad one is a 4xx.
template <typename Request>
void answer_completion(CompletionService& service, const httplib::Request& req, httplib::Response& res,
                       Request (*parse)(const json&, const ServeLimits&)) {
  answer(res, [&] {
    const Request request = parse(parse_body(req.body, service.limits()), service.limits());
    std::shared_ptr<CompletionService::Run> run = service.prepare(request);
    if (!service.streams(*run)) {
      send_json(res, service.respond(*run));
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [&service, run](size_t, httplib::DataSink& sink) {
      service.respond(*run, [&sink](const std::string& data) {
        const std::string event = "data: " + data + "\n\n";
        return sink.is_writable() && sink.write(event.data(), event.size());
      });
      sink.done();
      return true;
    });
  });
}

}  // namespace

void run_serve(const ServeCommand& c) {
  auto loaded = std::make_shared<LoadedLanguageModel>(
      load_language_model(c.checkpoint_path, c.params_file, c.device, c.tokenizer));
  if (!loaded->model->is_causal_lm())
    throw std::invalid_argument(c.checkpoint_path + ": this model does not generate text (zoo serve takes causal LMs)");
  const text::Tokenizer& tokenizer = *loaded->tokenizer;
  std::unique_ptr<Engine> engine = make_model_engine(loaded, c.max_pending);
  CompletionService service(*engine, tokenizer, c.model_name.empty() ? c.checkpoint_path : c.model_name, c.limits);

  httplib::Server server;
  const int threads = c.threads;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_payload_max_length(c.limits.max_body_bytes);
  // Clients keep their connection between requests (OpenAI's pool them); httplib's 5 s and 5 requests would
  // close a connection under a client that is about to reuse it. nginx's defaults instead.
  server.set_keep_alive_timeout(75);
  server.set_keep_alive_max_count(100);
  server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) send_error(res, ApiError(404, "no route " + req.method + " " + req.path, "", "not_found"));
    else if (res.status == 413) send_error(res, ApiError(413, "the request body is over the server's limit"));
    else
      send_error(res,
                 ApiError(res.status, "HTTP " + std::to_string(res.status) + " for " + req.method + " " + req.path));
  });
  server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, e.what(), "", "server_error"));
    } catch (...) {
      send_error(res, ApiError(500, "unknown error", "", "server_error"));
    }
  });

  server.Post("/v1/completions", [&](const httplib::Request& req, httplib::Response& res) {
    answer_completion<CompletionRequest>(service, req, res, &parse_completion_request);
  });
  server.Post("/v1/chat/completions", [&](const httplib::Request& req, httplib::Response& res) {
    answer_completion<ChatRequest>(service, req, res, &parse_chat_request);
  });
  server.Get("/v1/models", [&](const httplib::Request&, httplib::Response& res) { send_json(res, service.models()); });
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) { send_json(res, {{"status", "ok"}}); });
  server.Get("/tokenizer_info",
             [&](const httplib::Request&, httplib::Response& res) { send_json(res, service.tokenizer_info()); });
  server.Post("/tokenize", [&](const httplib::Request& req, httplib::Response& res) {
    answer(res,
           [&] { send_json(res, service.tokenize(parse_tokenize_request(parse_body(req.body, service.limits())))); });
  });
  server.Post("/detokenize", [&](const httplib::Request& req, httplib::Response& res) {
    answer(res, [&] {
      send_json(res, service.detokenize(parse_detokenize_request(parse_body(req.body, service.limits()))));
    });
  });

  // httplib listens with a backlog of 5: a burst of clients connecting at once overflows it and some are reset.
  // Its socket is taken here to listen again with the system's backlog (Linux updates it); and without
  // httplib's SO_REUSEPORT, so that a second server on a busy port is an error, not a silent sharer.
  int listening = -1;
  server.set_socket_options([&listening](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listening = sock;
  });
  int port = c.port;
  if (port == 0) port = server.bind_to_any_port(c.host);
  else if (!server.bind_to_port(c.host, port)) port = -1;
  if (port <= 0)
    throw std::runtime_error("zoo serve: cannot listen on " + c.host + ":" + std::to_string(c.port) +
                             " (in use, or not an address of this machine)");
  if (listening >= 0) ::listen(listening, SOMAXCONN);
  if (pipe(stop_pipe) != 0) throw std::runtime_error("zoo serve: cannot create a pipe for its stop signals");
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  std::thread stopper([&] {
    char signal = 0;
    while (read(stop_pipe[0], &signal, 1) < 0 && errno == EINTR) {
    }
    if (signal != 0) log::info(std::string("zoo serve: ") + (signal == SIGINT ? "SIGINT" : "SIGTERM") + ", stopping");
    server.stop();
  });
  std::cout << "zoo serve: " << service.models()["data"][0]["id"].get<std::string>() << " (" << engine->context()
            << " positions) listening on http://" << c.host << ":" << port << std::endl;
  server.listen_after_bind();
  const char ended = 0;  // a listener that ended on its own: end the waiting thread too
  [[maybe_unused]] const ssize_t n = write(stop_pipe[1], &ended, 1);
  stopper.join();
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
}

#endif  // ZOO_HAVE_HTTPLIB

}  // namespace zoo::serve
